//! What the accept loop serves on: a daemon's Unix socket, or a TCP port (loopd's web
//! console, the metrics listeners). The loop is the same for both; what differs is how a
//! connection's peer is described to the handler, how the socket is taken again to answer a
//! request hyper could not read, and what is left behind at shutdown (a socket file).

use crate::peer::PeerUser;
use nix::sys::socket::{Backlog, listen};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

/// A listening socket the accept loop (`bxhttp::serve`) takes connections from.
pub trait Listener: AsFd + Send + 'static {
    /// One accepted connection.
    type Stream: Stream;

    /// The next connection.
    fn accept_stream(&self) -> impl Future<Output = io::Result<Self::Stream>> + Send;

    /// Called once the loop takes no more connections, just before the listener is closed:
    /// what a new client should no longer find goes (a Unix socket's file). `name` says which
    /// server in the logs.
    fn retire(&self, name: &str);
}

/// One connection's socket, as the accept loop needs it.
pub trait Stream: AsyncRead + AsyncWrite + AsFd + Unpin + Send + Sync + 'static + Sized {
    /// What each request on the connection carries about its peer, in its extensions:
    /// [`PeerUser`] on a Unix socket, the peer's [`SocketAddr`] on TCP.
    type Peer: Clone + Send + Sync + 'static;

    /// Whether a request that is not HTTP/1.1 is answered 400 (the handler's
    /// [`crate::Handler::malformed`]) rather than served. On a Unix socket every client is
    /// boxmaker's own or a tool speaking HTTP/1.1 (`curl --unix-socket`), and the daemons say
    /// they take HTTP/1.1 only; on TCP a scraper may ask in HTTP/1.0 (the metrics listeners).
    const HTTP_1_1_ONLY: bool;

    /// The peer, when the kernel says who it is.
    fn peer(&self) -> Option<Self::Peer>;

    /// The same socket, from a duplicate of its descriptor (to send an answer on once hyper
    /// has given up on the connection).
    fn from_dup(fd: OwnedFd) -> io::Result<Self>;
}

impl Listener for UnixListener {
    type Stream = UnixStream;

    async fn accept_stream(&self) -> io::Result<UnixStream> {
        self.accept().await.map(|(stream, _)| stream)
    }

    fn retire(&self, name: &str) {
        let path = self
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(|p| p.to_path_buf()));
        if let Some(path) = path
            && let Err(e) = std::fs::remove_file(&path)
        {
            tracing::warn!(server = name, path = %path.display(), "cannot remove the socket: {e}");
        }
    }
}

impl Stream for UnixStream {
    type Peer = PeerUser;
    const HTTP_1_1_ONLY: bool = true;

    fn peer(&self) -> Option<PeerUser> {
        PeerUser::of(self)
    }

    fn from_dup(fd: OwnedFd) -> io::Result<UnixStream> {
        UnixStream::from_std(std::os::unix::net::UnixStream::from(fd))
    }
}

impl Listener for TcpListener {
    type Stream = TcpStream;

    async fn accept_stream(&self) -> io::Result<TcpStream> {
        self.accept().await.map(|(stream, _)| stream)
    }

    /// A TCP port leaves nothing behind: closing the listener is all.
    fn retire(&self, _name: &str) {}
}

impl Stream for TcpStream {
    type Peer = SocketAddr;
    const HTTP_1_1_ONLY: bool = false;

    fn peer(&self) -> Option<SocketAddr> {
        self.peer_addr().ok()
    }

    fn from_dup(fd: OwnedFd) -> io::Result<TcpStream> {
        TcpStream::from_std(std::net::TcpStream::from(fd))
    }
}

/// Sets `listener`'s backlog to the most the kernel allows (`net.core.somaxconn`, 4 096 by
/// default since Linux 5.4): tokio binds a TCP port with a backlog of 128, and a burst of
/// clients past the backlog is refused by the kernel (a Unix socket's connect fails with
/// `EAGAIN`) before the accept loop can answer it. Listening again on a listening socket
/// only changes its backlog.
pub(crate) fn widen_backlog(listener: &impl AsFd) -> io::Result<()> {
    listen(listener, Backlog::MAXALLOWABLE).map_err(io::Error::from)
}
