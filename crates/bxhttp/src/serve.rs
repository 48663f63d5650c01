//! The accept loop and one connection's life: the cap, the peer check, HTTP/1.1 with the
//! header-read and idle timeouts, and the drain at shutdown. The same loop serves a Unix
//! socket and a TCP port ([`Listener`]).

use crate::activity::{Activity, InFlight};
use crate::body::{RequestBody, ResponseBody};
use crate::io::Metered;
use crate::listener::{Listener, Stream};
use crate::malformed::{Withheld, Withhold};
use crate::open::Open;
use crate::{
    ACCEPT_RETRY_MS, CLOSING_ANSWER_TIMEOUT_MS, Handler, Limits, MAX_HEAD_BYTES, MAX_HEADER_FIELDS,
};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

/// Serves `handler` on `listener` within `limits` until `shutdown` resolves; then removes the
/// socket file (of a Unix socket) and closes the listener (new clients are refused), gives
/// open connections [`Limits::shutdown_drain_ms`] to finish and cuts the rest. `name` says
/// which server in the logs.
pub async fn serve<L, H>(
    name: &'static str,
    listener: L,
    handler: Arc<H>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener,
    H: Handler<L::Stream>,
{
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut open = Open::default();
    // The one 503 being answered: a new one replaces it, so a flood at the cap holds one more
    // descriptor at most.
    let mut overload: Option<AbortHandle> = None;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept_stream(), if open.settled() => accepted,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!(server = name, "accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                continue;
            }
        };
        if open.count() >= limits.max_connections {
            if let Some(rank) = open.close_one() {
                tracing::debug!(
                    server = name,
                    ?rank,
                    "at max_connections: closed the oldest connection that was not busy"
                );
            } else {
                tracing::warn!(
                    server = name,
                    max_connections = limits.max_connections,
                    "every connection has a request in flight; answering a new one 503"
                );
                if let Some(previous) = overload.take() {
                    open.abort(previous);
                }
                let why = format!(
                    "all {} connections have a request in flight",
                    limits.max_connections
                );
                let handler = Arc::clone(&handler);
                let answer = move || handler.overloaded(&why);
                overload = Some(tasks.spawn(answer_and_close(stream, answer, limits, name)));
                continue;
            }
        }
        let activity = Arc::new(Activity::new());
        let task = tasks.spawn(connection(
            stream,
            Arc::clone(&handler),
            Arc::clone(&activity),
            limits,
            name,
            stopped.clone(),
        ));
        open.add(activity, task);
    }
    // No new connection from here on: the socket file goes and the listener closes, so a
    // client is refused at once instead of waiting unanswered in the backlog until the drain
    // ends.
    listener.retire(name);
    drop(listener);
    let _ = stop.send(true);
    let drain = Duration::from_millis(limits.shutdown_drain_ms);
    let drained =
        tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            server = name,
            open = tasks.len(),
            "connections still open after the drain time; cutting them"
        );
        tasks.shutdown().await;
    }
    tracing::info!(server = name, "stopped");
}

/// hyper's HTTP/1.1 server with the header-read timeout (which needs a timer) and the
/// limits on a request head.
fn http1(limits: Limits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(limits.header_read_timeout_ms))
        .max_buf_size(MAX_HEAD_BYTES)
        .max_header_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADER_FIELDS);
    builder
}

/// Serves one connection: the peer check, then HTTP/1.1 until the client closes, a timeout
/// closes it, or the server stops; a request hyper cannot read gets the handler's
/// [`Handler::malformed`] answer.
async fn connection<S: Stream, H: Handler<S>>(
    stream: S,
    handler: Arc<H>,
    activity: Arc<Activity>,
    limits: Limits,
    name: &'static str,
    stopped: watch::Receiver<bool>,
) {
    if let Err(why) = handler.check_peer(&stream).await {
        tracing::warn!(server = name, "connection refused: {why}");
        let answer = move || handler.refused(&why);
        answer_and_close(stream, answer, limits, name).await;
        return;
    }
    // Read once, after the check passed: every request on the connection carries it.
    let peer = stream.peer();
    let withheld = Arc::new(Withheld::default());
    let io = TokioIo::new(Metered::new(
        Withhold::new(stream, Arc::clone(&withheld)),
        Arc::clone(&activity),
    ));
    let counted = Arc::clone(&activity);
    let answering = Arc::clone(&handler);
    let noted = Arc::clone(&withheld);
    let service = service_fn(move |request: Request<Incoming>| {
        let in_flight = InFlight::start(Arc::clone(&counted));
        let mut request = request.map(|body| RequestBody::new(body, Arc::clone(&counted)));
        if let Some(peer) = &peer {
            request.extensions_mut().insert(peer.clone());
        }
        let answer = answering.handle(request);
        let noted = Arc::clone(&noted);
        async move {
            let response = answer.await;
            noted.handler_answers(&response);
            Ok::<_, Infallible>(response.map(|body| ResponseBody::new(body, in_flight)))
        }
    });
    let conn = http1(limits)
        .keep_alive(H::KEEP_ALIVE)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let served = async {
        tokio::select! {
            result = conn.as_mut() => result,
            () = stopping(stopped) => {
                conn.as_mut().graceful_shutdown();
                conn.as_mut().await
            }
        }
    };
    let result = tokio::select! {
        result = served => result,
        () = idle(&activity, limits.idle_timeout_ms) => {
            tracing::debug!(
                server = name,
                idle_timeout_ms = limits.idle_timeout_ms,
                "closed a connection whose peer moved no byte it owed"
            );
            return;
        }
    };
    if let Some((status, fd)) = withheld.take() {
        let why = crate::malformed::why(status, result.as_ref().err());
        tracing::debug!(server = name, %status, "answering a request hyper cannot read: {why}");
        let answer = handler.malformed(status, &why);
        let limit = Duration::from_millis(CLOSING_ANSWER_TIMEOUT_MS);
        crate::malformed::answer::<S, _>(fd, answer, limit, name).await;
        return;
    }
    if let Err(e) = result {
        tracing::debug!(server = name, "connection ended with an error: {e}");
    }
}

/// Resolves once `stopped` turns true (or its sender is gone).
async fn stopping(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// Resolves once the peer has owed bytes and moved none for `idle_timeout_ms`.
async fn idle(activity: &Activity, idle_timeout_ms: u64) {
    let limit = Duration::from_millis(idle_timeout_ms);
    loop {
        // While nothing is owed, look again a whole limit later: the clock restarts when the
        // peer starts to owe, so that look is never late.
        let wait = if activity.owes() {
            match limit.checked_sub(activity.quiet_for()) {
                Some(left) if !left.is_zero() => left,
                _ => return,
            }
        } else {
            limit
        };
        tokio::time::sleep(wait).await;
    }
}

/// Reads one request on `stream`, answers it with `answer()` and closes; bounded by
/// [`CLOSING_ANSWER_TIMEOUT_MS`].
async fn answer_and_close<S: Stream, B>(
    stream: S,
    answer: impl Fn() -> Response<B> + Send + 'static,
    limits: Limits,
    name: &'static str,
) where
    B: hyper::body::Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static,
{
    let service = service_fn(move |_request: Request<Incoming>| {
        let response = answer();
        async move { Ok::<_, Infallible>(response) }
    });
    let conn = http1(limits)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let limit = Duration::from_millis(CLOSING_ANSWER_TIMEOUT_MS);
    match tokio::time::timeout(limit, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(server = name, "answered connection ended: {e}"),
        Err(_) => tracing::debug!(server = name, "answered connection timed out"),
    }
}
