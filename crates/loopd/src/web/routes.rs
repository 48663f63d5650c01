//! The console's paths: which path and method does what. Static assets and the sign-in link
//! answer anyone on the console's host; everything else needs a browser session, and every
//! POST its CSRF token from the console's own origin.

use super::form;
use super::guard::{self, CSRF_HEADER};
use super::{Console, TRANSCRIPT_PAGE_RECORDS, assets, pages};
use crate::api::{Backend, check_approval_answer};
use bxcore::{ApprovalId, SessionId};
use bxhttp::answer::{Body, Problem};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use proto::api::{ApprovalAnswer, OwnerAnswer, TaskRequest, error_kind, reserved};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::watch;

/// What every request handler shares.
pub(super) struct Ctx<B> {
    /// The engine.
    pub backend: Arc<B>,
    /// Sign-ins and addresses.
    pub console: Arc<Console>,
    /// Turns true when loopd stops; ends open event streams.
    pub shutdown: watch::Receiver<bool>,
}

/// A path the console serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route<'a> {
    Asset(&'a str),
    SignIn,
    SignOut,
    Sessions,
    Session(&'a str),
    New,
    Approvals,
    Answer(&'a str),
    Notes,
    Status,
    Diff(&'a str),
    UndoPlan(&'a str),
    Undo(&'a str),
    TaskForm,
    ApiTask,
    ApiEvents(&'a str),
}

impl Route<'_> {
    /// The route of `path`; `post` tells the undo (POST) from its confirmation page (GET).
    fn parse(path: &str, post: bool) -> Option<Route<'_>> {
        let parts: Vec<&str> = path.strip_prefix('/')?.split('/').collect();
        Some(match parts.as_slice() {
            ["sessions", id, "diff"] => Route::Diff(id),
            ["sessions", id, "undo"] if post => Route::Undo(id),
            ["sessions", id, "undo"] => Route::UndoPlan(id),
            [""] => Route::Sessions,
            ["static", name] => Route::Asset(name),
            ["signin"] => Route::SignIn,
            ["signout"] => Route::SignOut,
            ["sessions", id] => Route::Session(id),
            ["new"] => Route::New,
            ["approvals"] => Route::Approvals,
            ["approvals", id] => Route::Answer(id),
            ["notes"] => Route::Notes,
            ["status"] => Route::Status,
            ["tasks"] => Route::TaskForm,
            ["api", "tasks"] => Route::ApiTask,
            ["api", "sessions", id, "events"] => Route::ApiEvents(id),
            _ => return None,
        })
    }

    fn method(self) -> Method {
        match self {
            Route::SignOut
            | Route::Answer(_)
            | Route::Undo(_)
            | Route::TaskForm
            | Route::ApiTask => Method::POST,
            _ => Method::GET,
        }
    }

    /// Whether a script reads the answer (JSON problems) rather than a person (HTML pages).
    fn is_api(self) -> bool {
        matches!(self, Route::ApiTask | Route::ApiEvents(_))
    }
}

/// Answers one request, with the security headers on whatever the answer is.
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
    let route = Route::parse(&path, method == Method::POST);
    let is_api = route.is_some_and(Route::is_api);
    let mut response = match answer(&ctx, route, request).await {
        Ok(response) => response,
        Err(problem) if is_api => problem.into_response(),
        Err(problem) => pages::html(problem.status, pages::error(&problem)),
    };
    let cacheable = matches!(route, Some(Route::Asset(_))) && response.status().is_success();
    guard::secure_headers(response.headers_mut(), cacheable);
    tracing::debug!(%method, %path, status = response.status().as_u16(), "web request");
    Ok(response)
}

fn problem(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Problem {
    Problem::new(status, kind, message)
}

fn not_signed_in() -> Problem {
    problem(
        StatusCode::UNAUTHORIZED,
        error_kind::FORBIDDEN,
        "not signed in: run `boxctl web` on the box for a sign-in link",
    )
}

fn see_other(location: &str) -> Response<Body> {
    let mut response = Response::new(http_body_util::Empty::new().map_err(|e| match e {}).boxed());
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

pub(super) fn session_id(raw: &str) -> Result<SessionId, Problem> {
    SessionId::new(raw).map_err(|e| Problem::bad_request(format!("bad session id: {e}")))
}

/// [`crate::api::blocking`], its failure as the problem it answers with.
pub(super) async fn blocking<B, T, F>(backend: &Arc<B>, call: F) -> Result<T, Problem>
where
    B: Backend,
    T: Send + 'static,
    F: FnOnce(&B) -> Result<T, crate::api::ApiFailure> + Send + 'static,
{
    crate::api::blocking(backend, call)
        .await
        .map_err(Problem::from)
}

async fn answer<B, I>(
    ctx: &Ctx<B>,
    route: Option<Route<'_>>,
    request: Request<I>,
) -> Result<Response<Body>, Problem>
where
    B: Backend,
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let console = &ctx.console;
    if let Err(refusal) = guard::host_check(&request, console) {
        return Err(problem(
            StatusCode::MISDIRECTED_REQUEST,
            error_kind::FORBIDDEN,
            format!(
                "{refusal}: this console answers only as {}",
                console.origin.as_url()
            ),
        ));
    }
    let cookie = guard::session_cookie(request.headers());
    let signed = cookie.as_deref().and_then(|c| console.sign_ins.session(c));
    let Some(route) = route else {
        return Err(match signed {
            Some(_) => Problem::no_such_path(request.uri().path()),
            None => not_signed_in(),
        });
    };
    if request.method() != route.method() {
        return Err(Problem::wrong_method(
            request.uri().path(),
            route.method(),
            request.method(),
        ));
    }
    match route {
        Route::Asset(name) => return assets::answer(name).ok_or_else(not_signed_in),
        Route::SignIn => return Ok(sign_in(console, request.uri().query())),
        _ => {}
    }
    let Some(signed) = signed else {
        return Err(not_signed_in());
    };
    let mut form = HashMap::new();
    if route.method() == Method::POST {
        if let Some(why) = guard::cross_site(request.headers(), console) {
            return Err(problem(StatusCode::FORBIDDEN, error_kind::FORBIDDEN, why));
        }
        let header_token = request
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let body = form::read(request, console.max_body_bytes).await?;
        let given = if route.is_api() {
            header_token
        } else {
            form = form::fields(&body)?;
            form.get("csrf").cloned()
        };
        if !guard::csrf_ok(given.as_deref(), &signed.csrf) {
            return Err(problem(
                StatusCode::FORBIDDEN,
                error_kind::FORBIDDEN,
                "this request carries no valid CSRF token: reload the page and try again",
            ));
        }
        if route == Route::ApiTask {
            let task: TaskRequest = form::json(&body)?;
            return submit_streaming(ctx, task).await;
        }
        return post(ctx, route, cookie.as_deref(), &form).await;
    }
    get(ctx, route, request.uri().query(), &signed.csrf).await
}

fn sign_in(console: &Console, query: Option<&str>) -> Response<Body> {
    let token = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    match console.sign_ins.redeem(&token) {
        Ok(session) => {
            let mut response = see_other("/");
            let cookie = guard::set_cookie(&session, console.origin.https);
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            tracing::info!("web: a browser signed in");
            response
        }
        Err(e) => {
            tracing::info!(why = %e, "web: a sign-in link was refused");
            let refused = problem(
                StatusCode::UNAUTHORIZED,
                error_kind::FORBIDDEN,
                format!("{e}: run `boxctl web` on the box for a new one"),
            );
            pages::html(refused.status, pages::error(&refused))
        }
    }
}

async fn get<B: Backend>(
    ctx: &Ctx<B>,
    route: Route<'_>,
    query: Option<&str>,
    csrf: &str,
) -> Result<Response<Body>, Problem> {
    let backend = &ctx.backend;
    let page = match route {
        Route::Sessions => pages::sessions(csrf, &blocking(backend, |b| b.sessions()).await?),
        Route::Session(raw) => {
            let id = session_id(raw)?;
            let (from, _) = crate::api::page_query(query, TRANSCRIPT_PAGE_RECORDS)
                .map_err(Problem::bad_request)?;
            let records = {
                let id = id.clone();
                blocking(backend, move |b| {
                    b.records(&id, from, TRANSCRIPT_PAGE_RECORDS)
                })
                .await?
            };
            let list = blocking(backend, |b| b.sessions()).await?;
            let info = list.sessions.into_iter().find(|s| s.id == id);
            pages::session(csrf, &records, info.as_ref())
        }
        Route::New => pages::new_task(csrf),
        Route::Approvals => pages::approvals(csrf, &backend.approvals()?),
        Route::Notes => {
            let notifications = blocking(backend, |b| b.notifications()).await?;
            let memory = blocking(backend, |b| b.memory()).await?;
            pages::notes(csrf, &notifications, &memory)
        }
        Route::Status => pages::status(csrf, &backend.status().await),
        Route::Diff(raw) => super::undo::diff_page(ctx, raw, query, csrf).await?,
        Route::UndoPlan(raw) => super::undo::confirm_page(ctx, raw, query, csrf).await?,
        Route::ApiEvents(raw) => {
            let events = backend.follow(&session_id(raw)?)?;
            let ping = ctx.console.sse_ping_interval_ms;
            return Ok(crate::api::follow_stream(
                events,
                ping,
                ctx.shutdown.clone(),
            ));
        }
        _ => return Err(Problem::no_such_path("this path")),
    };
    Ok(pages::html(StatusCode::OK, page))
}

async fn post<B: Backend>(
    ctx: &Ctx<B>,
    route: Route<'_>,
    cookie: Option<&str>,
    form: &HashMap<String, String>,
) -> Result<Response<Body>, Problem> {
    let field = |name: &str| form.get(name).map(String::as_str).unwrap_or("");
    match route {
        Route::SignOut => {
            if let Some(cookie) = cookie {
                ctx.console.sign_ins.end(cookie);
            }
            let mut response = see_other("/");
            if let Ok(value) = HeaderValue::from_str(&guard::clear_cookie()) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            Ok(response)
        }
        Route::TaskForm => {
            let task = checked(task_of(field("session"), field("text"))?)?;
            let submitted = ctx.backend.submit(task).await?;
            // The turn goes on without a listener; its page follows it live.
            Ok(see_other(&format!(
                "/sessions/{}",
                submitted.accepted.session
            )))
        }
        Route::Answer(raw) => {
            let id = ApprovalId::new(raw)
                .map_err(|e| Problem::bad_request(format!("bad approval id: {e}")))?;
            let answer = match field("decision") {
                "approve" => OwnerAnswer::Approve,
                "approve_for_turn" => OwnerAnswer::ApproveForTurn,
                "deny" => OwnerAnswer::Deny,
                other => {
                    return Err(Problem::bad_request(format!(
                        "decision {other:?} is none of approve, approve_for_turn, deny"
                    )));
                }
            };
            let reason = Some(field("reason").trim().to_string()).filter(|r| !r.is_empty());
            let body = ApprovalAnswer { answer, reason };
            check_approval_answer(&body)?;
            // No peer uid: the answer came through the console, which the log's record shows
            // as an answer without one (docs/web.md).
            ctx.backend.answer_approval(&id, body, None).await?;
            Ok(see_other("/approvals"))
        }
        Route::Undo(raw) => Ok(see_other(&super::undo::undo(ctx, raw, form).await?)),
        _ => Err(Problem::no_such_path("this path")),
    }
}

/// A task from the console: text, and the session it goes to (a new one when empty).
fn task_of(session: &str, text: &str) -> Result<TaskRequest, Problem> {
    let session = match session.trim() {
        "" => None,
        raw => Some(session_id(raw)?),
    };
    Ok(TaskRequest {
        session,
        text: text.to_string(),
        task_id: None,
        overheard: Vec::new(),
    })
}

/// `task`, unless it names a session loopd keeps for itself or has no text.
fn checked(task: TaskRequest) -> Result<TaskRequest, Problem> {
    if let Some(why) = task.session.as_ref().and_then(reserved::reason) {
        return Err(Problem::bad_request(why));
    }
    if task.text.trim().is_empty() {
        return Err(Problem::bad_request("the task has no text"));
    }
    Ok(task)
}

async fn submit_streaming<B: Backend>(
    ctx: &Ctx<B>,
    task: TaskRequest,
) -> Result<Response<Body>, Problem> {
    let task = checked(task)?;
    let submitted = ctx.backend.submit(task).await?;
    let ping = ctx.console.sse_ping_interval_ms;
    Ok(crate::api::task_stream(
        submitted.events,
        ping,
        ctx.shutdown.clone(),
    ))
}
