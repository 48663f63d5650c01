//! The accept loop and one connection's life: the cap (room made, or a 503 answered, never a
//! reset), the peer check, HTTP/1.1 with the header-read and idle timeouts, and the drain at
//! shutdown. The same loop serves a Unix socket and a TCP port ([`Listener`]).

use crate::activity::{Activity, InFlight, Rank};
use crate::body::{RequestBody, ResponseBody};
use crate::closing;
use crate::io::Metered;
use crate::listener::{Listener, Stream, Waiting, peek, peek_raw, widen_backlog};
use crate::malformed::{Withheld, Withhold};
use crate::open::Open;
use crate::{
    ACCEPT_RETRY_MS, CLOSING_ANSWER_TIMEOUT_MS, FIRST_BYTE_GRACE_MS, Handler, Limits,
    MAX_HEAD_BYTES, MAX_HEADER_FIELDS, OVERLOAD_RETRY_AFTER_S,
};
use http::{HeaderValue, Request, Response, StatusCode, Version, header};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::either::Either;

/// How often the accept loop looks at the connections it asked to close while it waits for
/// them to be gone, in milliseconds.
const CLOSING_LOOK_MS: u64 = 10;

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
    if let Err(e) = widen_backlog(&listener) {
        tracing::warn!(server = name, "cannot widen the listen backlog: {e}");
    }
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut open = Open::default();
    // Places for the connections past the cap: those waiting for their first bytes and the
    // 503s being answered; each holds one until it is done (or handed back to the loop).
    let places = Arc::new(Semaphore::new(crate::fds::overload_places(
        limits.max_connections,
    )));
    // Connections past the cap whose first bytes came, back for a second look.
    let (spoke_tx, mut spoke_rx) = mpsc::unbounded_channel::<(L::Stream, OwnedSemaphorePermit)>();
    // Whether the last connection past the cap was answered 503, to log the change once.
    let mut full = false;
    tokio::pin!(shutdown);
    'accepting: loop {
        let settled = open.settled();
        let (stream, mut spoke) = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            // Its place goes as it is taken up again here.
            Some((stream, _place)) = spoke_rx.recv(), if settled => (stream, true),
            accepted = listener.accept_stream(), if settled => match accepted {
                Ok(stream) => (stream, false),
                Err(e) => {
                    tracing::warn!(server = name, "accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                    continue;
                }
            },
            // A connection asked to close may turn busy instead, or stall: look again soon.
            () = tokio::time::sleep(Duration::from_millis(CLOSING_LOOK_MS)), if !settled => continue,
        };
        // Room for it; at the cap, room made for a connection whose request is here (never
        // for a silent one, so a flood of silent connections cannot push out the others);
        // else a place to wait for its first bytes or to answer it 503; else wait until a
        // connection or a place is done, or a new connection's grace may be, and look again
        // (it waits in its socket meanwhile, and the next clients in the backlog).
        loop {
            spoke = spoke || peek(&stream) == Waiting::Bytes;
            if open.count() < limits.max_connections || (spoke && make_room(&mut open, name)) {
                if std::mem::take(&mut full) {
                    tracing::info!(server = name, "below max_connections again");
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
                break;
            }
            if let Ok(place) = Arc::clone(&places).try_acquire_owned() {
                if !spoke {
                    tasks.spawn(first_bytes(stream, spoke_tx.clone(), place, name));
                    break;
                }
                if !std::mem::replace(&mut full, true) {
                    tracing::warn!(
                        server = name,
                        max_connections = limits.max_connections,
                        "every connection is busy or new; answering new ones 503"
                    );
                }
                let handler = Arc::clone(&handler);
                let why = format!(
                    "all {} connections have a request in flight or have just opened",
                    limits.max_connections
                );
                let answer = move || overloaded(&*handler, &why);
                let mut builder = http1(limits);
                // Its request is here, or on its way.
                builder.header_read_timeout(Duration::from_millis(
                    FIRST_BYTE_GRACE_MS.min(limits.header_read_timeout_ms),
                ));
                tasks.spawn(async move {
                    closing::answer_and_close(stream, answer, &builder, name).await;
                    drop(place);
                });
                break;
            }
            tokio::select! {
                () = &mut shutdown => break 'accepting,
                Some(_) = tasks.join_next() => {}
                () = tokio::time::sleep(Duration::from_millis(FIRST_BYTE_GRACE_MS)) => {}
            }
        }
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
        closing::answer_and_close(stream, answer, &http1(limits), name).await;
        return;
    }
    // Read once, after the check passed: every request on the connection carries it.
    let peer = stream.peer();
    // To look into the socket while hyper owns it; valid as long as `conn` below is.
    let raw_fd = stream.as_fd().as_raw_fd();
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
        let version = request.version();
        let answer = if S::HTTP_1_1_ONLY && version != Version::HTTP_11 {
            Either::Right(std::future::ready(not_http_1_1(&*answering, version)))
        } else {
            Either::Left(answering.handle(request))
        };
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
    let stop = stopping(stopped);
    tokio::pin!(stop);
    let mut stop_seen = false;
    let result = loop {
        tokio::select! {
            result = conn.as_mut() => break result,
            () = &mut stop, if !stop_seen => {
                stop_seen = true;
                conn.as_mut().graceful_shutdown();
            }
            () = activity.asked_to_close() => match activity.rank() {
                // A request read since the loop looked, or a peer sending or reading right
                // now: it stays open (the loop counts it again).
                Rank::Busy | Rank::New => {}
                // Between requests with the peer's next request already in the socket, unread:
                // it stays, hyper reads that request, and the loop counts it again. Closing it
                // would reset the request, and the peer could not tell whether it ran.
                Rank::NoRequest if activity.started() && peek_raw(raw_fd) == Waiting::Bytes => {}
                // Between requests, or its answer's last bytes still going out: hyper closes
                // it once nothing is left to write.
                Rank::NoRequest if activity.started() => conn.as_mut().graceful_shutdown(),
                // Silent, a head arriving slowly, or a peer that stalls its request.
                rank => {
                    tracing::debug!(server = name, ?rank, "closed to make room at max_connections");
                    return;
                }
            },
            () = idle(&activity, limits.idle_timeout_ms) => {
                tracing::debug!(
                    server = name,
                    idle_timeout_ms = limits.idle_timeout_ms,
                    "closed a connection whose peer moved no byte it owed"
                );
                return;
            }
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

/// Waits, holding `place`, for the first bytes of a connection that came past the cap silent,
/// at most [`FIRST_BYTE_GRACE_MS`]: once they come it goes back to the loop for a second
/// look (`spoke`); one that sends nothing, or closes, is closed without an answer (it asked
/// nothing), its socket empty.
async fn first_bytes<S: Stream>(
    stream: S,
    spoke: mpsc::UnboundedSender<(S, OwnedSemaphorePermit)>,
    place: OwnedSemaphorePermit,
    name: &'static str,
) {
    let deadline = Instant::now() + Duration::from_millis(FIRST_BYTE_GRACE_MS);
    loop {
        match tokio::time::timeout_at(deadline, stream.wait_readable()).await {
            Ok(Ok(())) => match stream.waiting() {
                Waiting::Bytes => {
                    // The loop is gone only at shutdown: then the connection closes.
                    let _ = spoke.send((stream, place));
                    return;
                }
                Waiting::Nothing => continue,
                Waiting::Closed => return,
            },
            Ok(Err(e)) => {
                tracing::debug!(server = name, "a connection past the cap failed: {e}");
                return;
            }
            Err(_) => {
                tracing::debug!(
                    server = name,
                    first_byte_grace_ms = FIRST_BYTE_GRACE_MS,
                    "closed a connection past the cap that sent nothing"
                );
                return;
            }
        }
    }
}

/// Asks the connection [`Open::close_one`] picks to close, to make room at the cap; whether
/// there was one (none: every connection is busy or new).
fn make_room(open: &mut Open, name: &'static str) -> bool {
    match open.close_one() {
        Some(rank) => {
            tracing::debug!(
                server = name,
                ?rank,
                "at max_connections: asked the oldest connection that is not busy or new to close"
            );
            true
        }
        None => false,
    }
}

/// The handler's 503 for a connection past the cap, with `Retry-After` unless it set one.
fn overloaded<S, H: Handler<S>>(handler: &H, why: &str) -> Response<H::Body> {
    let mut response = handler.overloaded(why);
    response
        .headers_mut()
        .entry(header::RETRY_AFTER)
        .or_insert(HeaderValue::from(OVERLOAD_RETRY_AFTER_S));
    response
}

/// The 400 of a request that is not HTTP/1.1 on a server that takes HTTP/1.1 only
/// ([`Stream::HTTP_1_1_ONLY`]); the connection closes after it.
fn not_http_1_1<S, H: Handler<S>>(handler: &H, version: Version) -> Response<H::Body> {
    let why = format!("the request is {version:?}; this server speaks HTTP/1.1 only");
    let mut response = handler.malformed(StatusCode::BAD_REQUEST, &why);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests;
