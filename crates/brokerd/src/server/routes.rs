//! The routes: `POST /v1/call`, `GET /v1/catalogue?session=ID` (with its version, see
//! [`super::catalogue`]), `GET /v1/health`, `POST /v1/undo` and `GET /v1/diff` (see
//! [`super::undo`]); JSON in
//! (size-capped) and out, errors as `proto::api::ApiError`; and `GET /metrics`, Prometheus
//! text ([`bxmetrics::scrape`]).

use super::NAMES;
use crate::broker::Broker;
use bxcore::SessionId;
pub(super) use bxhttp::answer::Body;
use bxhttp::answer::{Problem, json};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use proto::api::error_kind;
use proto::{BrokerHealth, ToolRequest, UndoRequest};
use std::convert::Infallible;
use std::sync::Arc;

/// Answers one request; never fails (errors are answers).
pub(super) async fn handle<I>(
    broker: Arc<Broker>,
    max_body_bytes: usize,
    request: Request<I>,
) -> Result<Response<Body>, Infallible>
where
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = dispatch(broker, max_body_bytes, request)
        .await
        .unwrap_or_else(Problem::into_response);
    tracing::trace!(%method, %path, status = response.status().as_u16(), "request");
    Ok(response)
}

async fn dispatch<I>(
    broker: Arc<Broker>,
    max_body_bytes: usize,
    request: Request<I>,
) -> Result<Response<Body>, Problem>
where
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let path = request.uri().path();
    let allowed = match path {
        "/v1/call" | "/v1/undo" => Method::POST,
        "/v1/catalogue" | "/v1/diff" | "/v1/health" | "/metrics" => Method::GET,
        _ => return Err(Problem::no_such_path(path)),
    };
    if request.method() != allowed {
        return Err(Problem::wrong_method(path, allowed, request.method()));
    }
    match path {
        "/metrics" => metrics(&broker, request.headers()),
        "/v1/health" => {
            // The probe's answer always, granted or not: a status line says which walls
            // are up before anyone writes an exec grant.
            let health = BrokerHealth {
                status: "ok".to_owned(),
                exec: Some(broker.exec_status()),
                checkpoints: Some(
                    broker
                        .checkpoints()
                        .map_or_else(|| "off".to_owned(), |store| store.status_line()),
                ),
            };
            Ok(json(StatusCode::OK, &health))
        }
        "/v1/diff" => super::undo::diff(&broker, request.uri().query()),
        "/v1/undo" => {
            let asked: UndoRequest =
                bxhttp::request::read_json(request, &NAMES, max_body_bytes, "an UndoRequest")
                    .await?;
            super::undo::undo(broker, asked).await
        }
        "/v1/catalogue" => {
            let session = session_query(request.uri().query())?;
            broker.probed_for(&session).await;
            let catalogue = broker.catalogue(&session);
            Ok(super::catalogue::answer(&catalogue, request.headers()))
        }
        _ => {
            let tool_request: ToolRequest =
                bxhttp::request::read_json(request, &NAMES, max_body_bytes, "a ToolRequest")
                    .await?;
            // On its own task, so the call ends, and is audited, even if the client goes away.
            let response = tokio::spawn(async move { broker.call(&tool_request).await })
                .await
                .map_err(|e| {
                    Problem::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        error_kind::INTERNAL,
                        format!("the call's task failed: {e}"),
                    )
                })?;
            Ok(json(StatusCode::OK, &response))
        }
    }
}

/// The answer to `GET /metrics`: brokerd's metrics in the format the `Accept` header asks for.
fn metrics(broker: &Broker, headers: &HeaderMap) -> Result<Response<Body>, Problem> {
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    let scraped = bxmetrics::scrape(broker.metrics().as_ref(), accept).map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            error_kind::INTERNAL,
            format!("the metrics could not be encoded: {e}"),
        )
    })?;
    let body = Full::new(Bytes::from(scraped.body)).boxed();
    Response::builder()
        .header(CONTENT_TYPE, scraped.content_type)
        .body(body)
        .map_err(|e| {
            Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                error_kind::INTERNAL,
                format!("the metrics answer could not be built: {e}"),
            )
        })
}

/// The session of `?session=ID`; anything else in the query is an error that says what.
fn session_query(query: Option<&str>) -> Result<SessionId, Problem> {
    let mut session = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("session", value)) => {
                let id = SessionId::new(value)
                    .map_err(|e| Problem::bad_request(format!("query parameter session: {e}")))?;
                session = Some(id);
            }
            _ => {
                return Err(Problem::bad_request(format!(
                    "unknown query parameter {pair:?}; use session=ID"
                )));
            }
        }
    }
    session.ok_or_else(|| Problem::bad_request("the query parameter session=ID is required"))
}
