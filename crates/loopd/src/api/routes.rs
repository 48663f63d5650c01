//! The `/v1` routes: which path and method does what, and the answer of each.

use super::body::{Body, Problem, json, read_json};
use super::owner::OwnerAct;
use super::sse::{follow_stream, task_stream};
use super::{ApiFailure, ApiOptions, Backend, MAX_PAGE_RECORDS, UsageQuery};
use bxcore::{ApprovalId, SessionId};
use http::{Method, Request, Response, StatusCode, header};
use proto::api::{TaskRequest, reserved};
use proto::{ForkRequest, UndoTurns};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::watch;

/// What every request handler shares.
pub(super) struct Ctx<B> {
    /// The engine.
    pub backend: Arc<B>,
    /// Limits.
    pub options: ApiOptions,
    /// Turns true when the server stops; ends open streams.
    pub shutdown: watch::Receiver<bool>,
}

/// Resolves once `shutdown` turns true (or its sender is gone).
pub(crate) async fn stopping(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// A path the API serves, with the session id as written in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route<'a> {
    Tasks,
    Sessions,
    Session(&'a str),
    Events(&'a str),
    Cancel(&'a str),
    Compact(&'a str),
    Undo(&'a str),
    Fork(&'a str),
    Diff(&'a str),
    Status,
    Memory,
    Notifications,
    Approvals,
    Approval(&'a str),
    Schedules,
    ScheduleRun(&'a str),
    SchedulePause(&'a str),
    ScheduleResume(&'a str),
    Usage,
    Metrics,
    WebLink,
    WebRevoke,
}

impl Route<'_> {
    fn parse(path: &str) -> Option<Route<'_>> {
        // Where every Prometheus looks, outside the versioned API.
        if path == "/metrics" {
            return Some(Route::Metrics);
        }
        let parts: Vec<&str> = path.strip_prefix("/v1/")?.split('/').collect();
        Some(match parts.as_slice() {
            ["tasks"] => Route::Tasks,
            ["sessions"] => Route::Sessions,
            ["sessions", id] => Route::Session(id),
            ["sessions", id, "events"] => Route::Events(id),
            ["sessions", id, "cancel"] => Route::Cancel(id),
            ["sessions", id, "compact"] => Route::Compact(id),
            ["sessions", id, "undo"] => Route::Undo(id),
            ["sessions", id, "fork"] => Route::Fork(id),
            ["sessions", id, "diff"] => Route::Diff(id),
            ["status"] => Route::Status,
            ["memory"] => Route::Memory,
            ["notifications"] => Route::Notifications,
            ["approvals"] => Route::Approvals,
            ["approvals", id] => Route::Approval(id),
            ["schedules"] => Route::Schedules,
            ["schedules", name, "run"] => Route::ScheduleRun(name),
            ["schedules", name, "pause"] => Route::SchedulePause(name),
            ["schedules", name, "resume"] => Route::ScheduleResume(name),
            ["usage"] => Route::Usage,
            ["web", "link"] => Route::WebLink,
            ["web", "revoke"] => Route::WebRevoke,
            _ => return None,
        })
    }

    fn method(self) -> Method {
        match self {
            Route::Tasks
            | Route::Cancel(_)
            | Route::Compact(_)
            | Route::Undo(_)
            | Route::Fork(_)
            | Route::Approval(_)
            | Route::ScheduleRun(_)
            | Route::SchedulePause(_)
            | Route::ScheduleResume(_)
            | Route::WebLink
            | Route::WebRevoke => Method::POST,
            Route::Sessions
            | Route::Approvals
            | Route::Schedules
            | Route::Session(_)
            | Route::Diff(_)
            | Route::Events(_)
            | Route::Status
            | Route::Memory
            | Route::Notifications
            | Route::Usage
            | Route::Metrics => Method::GET,
        }
    }
}

/// `turn` of `?turn=N`, if given; anything else in the query is an error that says what.
fn turn_query(query: Option<&str>) -> Result<Option<u64>, String> {
    let mut turn = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("turn", value)) => {
                turn = Some(
                    value
                        .parse()
                        .map_err(|_| format!("turn={value:?} is not a turn number"))?,
                );
            }
            _ => return Err(format!("unknown query parameter {pair:?}; use turn=N")),
        }
    }
    Ok(turn)
}

/// `from` and `limit` of `?from=N&limit=M`: `limit` defaults to `default_limit` and is capped
/// at [`MAX_PAGE_RECORDS`]; anything else in the query is an error that says what.
pub(crate) fn page_query(query: Option<&str>, default_limit: u64) -> Result<(u64, u64), String> {
    let (mut from, mut limit) = (0, default_limit);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number = || {
            value
                .parse::<u64>()
                .map_err(|_| format!("query parameter {key}={value:?} is not a whole number"))
        };
        match key {
            "from" => from = number()?,
            "limit" => limit = number()?,
            _ => {
                return Err(format!(
                    "unknown query parameter {key:?}; use from and limit"
                ));
            }
        }
    }
    if limit == 0 {
        return Err("query parameter limit must be at least 1".into());
    }
    Ok((from, limit.min(MAX_PAGE_RECORDS)))
}

fn session_id(raw: &str) -> Result<SessionId, Problem> {
    SessionId::new(raw)
        .map_err(|e| Problem::bad_request(format!("bad session id in the path: {e}")))
}

fn approval_id(raw: &str) -> Result<ApprovalId, Problem> {
    ApprovalId::new(raw)
        .map_err(|e| Problem::bad_request(format!("bad approval id in the path: {e}")))
}

fn wants_event_stream(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")))
}

/// The request's peer, refused (403) when it descends from brokerd, and (503) when brokerd
/// cannot be found to tell: what the owner alone may do (answer an approval, let a browser
/// in) is never done by an MCP server (`owner`).
async fn owner_peer<B, I>(
    ctx: &Ctx<B>,
    request: &Request<I>,
    act: OwnerAct,
) -> Result<Option<bxhttp::peer::PeerUser>, ApiFailure> {
    let peer = request.extensions().get::<bxhttp::peer::PeerUser>();
    super::owner::not_brokers_descendant(ctx.options.broker.as_ref(), peer, act).await?;
    Ok(peer.cloned())
}

/// Runs a backend call that may touch the disk off the async threads.
pub(crate) async fn blocking<B, T, F>(backend: &Arc<B>, call: F) -> Result<T, ApiFailure>
where
    B: Backend,
    T: Send + 'static,
    F: FnOnce(&B) -> Result<T, ApiFailure> + Send + 'static,
{
    let backend = Arc::clone(backend);
    tokio::task::spawn_blocking(move || call(&backend))
        .await
        .unwrap_or_else(|e| {
            Err(ApiFailure::Internal(format!(
                "the request's task failed: {e}"
            )))
        })
}

fn answer<T: serde::Serialize>(result: Result<T, ApiFailure>) -> Response<Body> {
    match result {
        Ok(value) => json(StatusCode::OK, &value),
        Err(f) => Problem::from(f).into_response(),
    }
}

/// Answers one request.
pub(super) async fn handle<B, I>(
    ctx: Arc<Ctx<B>>,
    request: Request<I>,
) -> Result<Response<Body>, Infallible>
where
    B: Backend,
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = match dispatch(&ctx, request).await {
        Ok(response) => response,
        Err(problem) => problem.into_response(),
    };
    tracing::debug!(%method, %path, status = response.status().as_u16(), "api request");
    Ok(response)
}

async fn dispatch<B, I>(ctx: &Ctx<B>, request: Request<I>) -> Result<Response<Body>, Problem>
where
    B: Backend,
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let path = request.uri().path().to_owned();
    let Some(route) = Route::parse(&path) else {
        return Err(Problem::no_such_path(&path));
    };
    let allowed = route.method();
    if request.method() != allowed {
        return Err(Problem::wrong_method(&path, allowed, request.method()));
    }
    let backend = &ctx.backend;
    let ping_ms = ctx.options.sse_ping_interval_ms;
    Ok(match route {
        Route::Tasks => {
            let stream = wants_event_stream(request.headers());
            let task: TaskRequest = read_json(request, ctx.options.max_body_bytes).await?;
            if let Some(why) = task.session.as_ref().and_then(reserved::reason) {
                return Err(Problem::bad_request(why));
            }
            let submitted = backend.submit(task).await?;
            if stream {
                task_stream(submitted.events, ping_ms, ctx.shutdown.clone())
            } else {
                // The turn goes on without a listener: its events are dropped.
                json(StatusCode::ACCEPTED, &submitted.accepted)
            }
        }
        Route::Sessions => answer(blocking(backend, |b| b.sessions()).await),
        Route::Session(raw) => {
            let id = session_id(raw)?;
            let (from, limit) = page_query(request.uri().query(), ctx.options.page_records)
                .map_err(Problem::bad_request)?;
            answer(blocking(backend, move |b| b.records(&id, from, limit)).await)
        }
        Route::Events(raw) => {
            let id = session_id(raw)?;
            let events = backend.follow(&id)?;
            follow_stream(events, ping_ms, ctx.shutdown.clone())
        }
        Route::Cancel(raw) => answer(backend.cancel(&session_id(raw)?)),
        Route::Compact(raw) => answer(backend.compact(&session_id(raw)?).await),
        Route::Undo(raw) => {
            let id = session_id(raw)?;
            // It rewrites the owner's files: never for a tool's process (brokerd's descendant).
            owner_peer(ctx, &request, OwnerAct::Undo).await?;
            let asked: UndoTurns = read_json(request, ctx.options.max_body_bytes).await?;
            answer(backend.undo(&id, asked).await)
        }
        Route::Fork(raw) => {
            let id = session_id(raw)?;
            let asked: ForkRequest = read_json(request, ctx.options.max_body_bytes).await?;
            if let Some(why) = asked.new_session.as_ref().and_then(reserved::reason) {
                return Err(Problem::bad_request(why));
            }
            answer(backend.fork(&id, asked).await)
        }
        Route::Diff(raw) => {
            let id = session_id(raw)?;
            let turn = turn_query(request.uri().query()).map_err(Problem::bad_request)?;
            answer(blocking(backend, move |b| b.diff(&id, turn)).await)
        }
        Route::Status => json(StatusCode::OK, &backend.status().await),
        Route::Memory => answer(blocking(backend, |b| b.memory()).await),
        Route::Notifications => answer(blocking(backend, |b| b.notifications()).await),
        Route::Approvals => answer(backend.approvals()),
        Route::Approval(raw) => {
            let id = approval_id(raw)?;
            let uid = owner_peer(ctx, &request, OwnerAct::Answer)
                .await?
                .map(|p| p.uid);
            let body =
                super::body::read_approval_answer(request, ctx.options.max_body_bytes).await?;
            super::check_approval_answer(&body)?;
            answer(backend.answer_approval(&id, body, uid).await)
        }
        Route::WebLink | Route::WebRevoke => {
            // A link signs a browser in, and a signed-in browser answers approvals: so it is
            // refused to brokerd's descendants, like an answer itself.
            let act = match route {
                Route::WebLink => OwnerAct::Link,
                _ => OwnerAct::Revoke,
            };
            owner_peer(ctx, &request, act).await?;
            let sign_ins = ctx.options.web.as_deref();
            match route {
                Route::WebLink => answer(super::web::link(sign_ins)),
                _ => answer(super::web::revoke(sign_ins)),
            }
        }
        Route::Schedules => answer(blocking(backend, |b| b.schedules()).await),
        Route::ScheduleRun(name) => answer(backend.run_schedule(name).await),
        Route::SchedulePause(name) | Route::ScheduleResume(name) => {
            let paused = matches!(route, Route::SchedulePause(_));
            let name = name.to_string();
            answer(blocking(backend, move |b| b.pause_schedule(&name, paused)).await)
        }
        Route::Usage => {
            let query = UsageQuery::parse(request.uri().query()).map_err(Problem::bad_request)?;
            // Off the async threads: an unknown session is looked for on disk.
            answer(blocking(backend, move |b| b.usage(&query)).await)
        }
        Route::Metrics => {
            let accept = request
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            super::body::metrics(&*backend.metrics(), accept)
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn routes_parse_with_their_session_ids() {
        assert_eq!(Route::parse("/v1/tasks"), Some(Route::Tasks));
        assert_eq!(Route::parse("/v1/sessions"), Some(Route::Sessions));
        assert_eq!(Route::parse("/v1/sessions/a"), Some(Route::Session("a")));
        assert_eq!(
            Route::parse("/v1/sessions/a/events"),
            Some(Route::Events("a"))
        );
        assert_eq!(
            Route::parse("/v1/sessions/a/cancel"),
            Some(Route::Cancel("a"))
        );
        assert_eq!(
            Route::parse("/v1/sessions/a/compact"),
            Some(Route::Compact("a"))
        );
        assert_eq!(Route::parse("/v1/status"), Some(Route::Status));
        assert_eq!(
            Route::parse("/v1/notifications"),
            Some(Route::Notifications)
        );
        assert_eq!(Route::parse("/v1/approvals"), Some(Route::Approvals));
        assert_eq!(
            Route::parse("/v1/approvals/ap-1"),
            Some(Route::Approval("ap-1"))
        );
        assert_eq!(Route::parse("/v1/schedules"), Some(Route::Schedules));
        assert_eq!(
            Route::parse("/v1/schedules/daily/run"),
            Some(Route::ScheduleRun("daily"))
        );
        assert_eq!(
            Route::parse("/v1/schedules/daily/pause"),
            Some(Route::SchedulePause("daily"))
        );
        assert_eq!(
            Route::parse("/v1/schedules/daily/resume"),
            Some(Route::ScheduleResume("daily"))
        );
        assert_eq!(Route::parse("/v1/usage"), Some(Route::Usage));
        assert_eq!(Route::parse("/metrics"), Some(Route::Metrics));
        assert_eq!(Route::parse("/v1/sessions/"), Some(Route::Session("")));
        for unknown in [
            "/",
            "/v1",
            "/v2/tasks",
            "/v1/tasks/x",
            "/v1/sessions/a/b",
            "/status",
            "/metrics/",
            "/v1/metrics",
        ] {
            assert_eq!(Route::parse(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn page_query_defaults_caps_and_refuses() {
        assert_eq!(page_query(None, 100), Ok((0, 100)));
        assert_eq!(page_query(Some("from=5&limit=7"), 100), Ok((5, 7)));
        assert_eq!(
            page_query(Some("limit=999999"), 100),
            Ok((0, MAX_PAGE_RECORDS))
        );
        assert!(
            page_query(Some("limit=0"), 100)
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(
            page_query(Some("from=x"), 100)
                .unwrap_err()
                .contains("from=\"x\"")
        );
        assert!(
            page_query(Some("page=2"), 100)
                .unwrap_err()
                .contains("\"page\"")
        );
    }
}
