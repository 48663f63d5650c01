//! Binding, the accept loop, and the handle that controls a running server.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use crate::error::Error;
use crate::http::handle;
use crate::options::{Listen, Options};
use crate::record::RecordedRequest;
use crate::slots::SlotInfo;
use crate::state::State;

/// Pause after a failed `accept` (e.g. out of file descriptors), in milliseconds.
const ACCEPT_RETRY_MS: u64 = 50;

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// A running fakellama server. Dropping it stops the server too (without waiting).
#[derive(Debug)]
pub struct Handle {
    addr: Listen,
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// Checks the slot save path, binds the listener and spawns the server on the current tokio
/// runtime.
pub async fn start(options: Options) -> Result<Handle, Error> {
    if let Some(path) = &options.slot_save_path
        && !path.is_dir()
    {
        return Err(Error::SlotSavePath { path: path.clone() });
    }
    let (listener, addr) = match &options.listen {
        Listen::Tcp(requested) => {
            let listener = TcpListener::bind(requested)
                .await
                .map_err(|source| Error::BindTcp {
                    addr: *requested,
                    source,
                })?;
            let bound = listener.local_addr().map_err(|source| Error::BindTcp {
                addr: *requested,
                source,
            })?;
            (Listener::Tcp(listener), Listen::Tcp(bound))
        }
        Listen::Unix(path) => {
            remove_stale_socket(path);
            let listener = UnixListener::bind(path).map_err(|source| Error::BindUnix {
                path: path.clone(),
                source,
            })?;
            (Listener::Unix(listener), Listen::Unix(path.clone()))
        }
    };
    tracing::info!(%addr, n_ctx = options.n_ctx, slots = options.slots, "fakellama started");
    let state = Arc::new(State::new(options));
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(serve(listener, Arc::clone(&state), stopped));
    Ok(Handle {
        addr,
        state,
        stop: Some(stop),
        task: Some(task),
    })
}

/// Removes a socket file left by an earlier run; anything else at the path is left alone.
fn remove_stale_socket(path: &Path) {
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if !is_socket {
        return;
    }
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(path = %path.display(), "cannot remove stale socket: {e}");
    }
}

enum Stream {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(listener: &Listener) -> std::io::Result<Stream> {
    Ok(match listener {
        Listener::Tcp(l) => Stream::Tcp(l.accept().await?.0),
        Listener::Unix(l) => Stream::Unix(l.accept().await?.0),
    })
}

async fn serve(listener: Listener, state: Arc<State>, mut stopped: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = accept(&listener) => accepted,
        };
        if accepted.is_ok() {
            state.connections.fetch_add(1, Ordering::Relaxed);
        }
        match accepted {
            Ok(Stream::Tcp(stream)) => {
                connections.spawn(serve_connection(stream, Arc::clone(&state)));
            }
            Ok(Stream::Unix(stream)) => {
                connections.spawn(serve_connection(stream, Arc::clone(&state)));
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(ACCEPT_RETRY_MS)).await;
            }
        }
    }
    connections.abort_all();
    let socket_path = match &listener {
        Listener::Unix(l) => l
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(Path::to_path_buf)),
        Listener::Tcp(_) => None,
    };
    if let Some(path) = socket_path {
        let _ = std::fs::remove_file(path);
    }
    tracing::info!("fakellama stopped");
}

async fn serve_connection<S>(stream: S, state: Arc<State>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| handle(Arc::clone(&state), request));
    if let Err(e) = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!("connection ended with an error: {e}");
    }
}

impl Handle {
    /// Where the server listens (the actual port when port 0 was asked for).
    pub fn addr(&self) -> &Listen {
        &self.addr
    }

    /// The base URL: `http://127.0.0.1:PORT` for TCP, `unix:/path/to.sock` for a Unix socket.
    pub fn url(&self) -> String {
        match &self.addr {
            Listen::Tcp(addr) => format!("http://{addr}"),
            Listen::Unix(path) => format!("unix:{}", path.display()),
        }
    }

    /// The chat requests answered so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.records.all()
    }

    /// Each slot's state now (what `/slots` reports): a test can wait until a request holds
    /// a slot.
    pub fn slots(&self) -> Vec<SlotInfo> {
        self.state.slots.snapshot()
    }

    /// The connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        self.state.records.clear();
    }

    /// Stops accepting, closes open connections, and waits for the server task to end.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(task) = self.task.take() else {
            return;
        };
        if let Err(e) = task.await {
            tracing::warn!("server task failed: {e}");
        }
    }
}
