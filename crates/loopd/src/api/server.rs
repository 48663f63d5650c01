//! The API as a [`bxhttp::Handler`]: loopd's peer check, routes and error bodies, served by
//! bxhttp's accept loop (connection cap, timeouts, bounded drain at shutdown).

use super::body::Body;
use super::routes::{Ctx, handle};
use super::{ApiOptions, Backend, NAMES};
use bxhttp::{Names, RequestBody};
use http::{Request, Response};
use std::sync::Arc;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// Serves the API on `listener` with `backend` until `shutdown` resolves; then stops
/// accepting, ends open event streams (each first sends the events already waiting for it),
/// gives open connections the drain time of [`ApiOptions::connections`] to finish, cuts the
/// rest, and removes the socket file. Everything is served until then, so the daemon's
/// `shutdown` is where the engine stops taking tasks and lets its turns end.
///
/// Each connection's peer is checked first (see [`bxhttp::peer::check_user`]); a refused peer
/// gets a 403 and the connection is closed. At `api.max_connections` a connection without a
/// request in flight is closed to make room, or the new one gets a 503 (see [`bxhttp`]).
pub async fn serve<B: Backend>(
    listener: UnixListener,
    backend: Arc<B>,
    options: ApiOptions,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopped) = watch::channel(false);
    let limits = options.connections;
    let api = Arc::new(Api {
        ctx: Arc::new(Ctx {
            backend,
            options,
            shutdown: stopped,
        }),
    });
    // Event streams end when the server stops, before the drain waits for them.
    let shutdown = async move {
        shutdown.await;
        let _ = stop.send(true);
    };
    bxhttp::serve("loopd API", listener, api, limits, shutdown).await;
}

/// loopd's side of the server.
struct Api<B> {
    ctx: Arc<Ctx<B>>,
}

impl<B: Backend> bxhttp::Handler for Api<B> {
    type Body = Body;
    const NAMES: Names = NAMES;

    async fn check_peer(&self, stream: &UnixStream) -> Result<(), String> {
        let options = &self.ctx.options;
        bxhttp::peer::check_user(stream, &NAMES, options.own_uid, options.allowed_gid).await?;
        Ok(())
    }

    fn handle(
        &self,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<Body>> + Send + use<B> {
        let ctx = Arc::clone(&self.ctx);
        async move {
            match handle(ctx, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}
