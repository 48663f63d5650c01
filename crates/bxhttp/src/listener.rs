//! What the accept loop serves on: a daemon's Unix socket, or a TCP port (loopd's web
//! console, the metrics listeners). The loop is the same for both; what differs is how a
//! connection's peer is described to the handler, how the socket is taken again to answer a
//! request hyper could not read, and what is left behind at shutdown (a socket file).

use crate::peer::PeerUser;
use nix::sys::socket::{Backlog, MsgFlags, listen, recv};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use tokio::io::{AsyncRead, AsyncWrite, Interest};
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

    /// Resolves once the socket may be read: bytes came, the peer closed, or a wake with
    /// nothing behind it ([`Stream::waiting`] tells which).
    fn wait_readable(&self) -> impl Future<Output = io::Result<()>> + Send;

    /// What waits unread in the socket, looked at without reading it. Nothing there clears
    /// the socket's readiness, so the next [`Stream::wait_readable`] waits for the peer.
    fn waiting(&self) -> Waiting;
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

    async fn wait_readable(&self) -> io::Result<()> {
        self.readable().await
    }

    fn waiting(&self) -> Waiting {
        waiting(self.try_io(Interest::READABLE, || peek_fd(self)))
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

    async fn wait_readable(&self) -> io::Result<()> {
        self.readable().await
    }

    fn waiting(&self) -> Waiting {
        waiting(self.try_io(Interest::READABLE, || peek_fd(self)))
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

/// What waits in a connection's socket, looked at without taking it
/// ([`Stream::waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Bytes of the peer's, unread: its request (or the start of it) is here.
    Bytes,
    /// Nothing yet.
    Nothing,
    /// The peer closed (or the socket failed): nothing will come.
    Closed,
}

/// One byte of `fd`'s socket looked at without reading it (`MSG_PEEK`) and without waiting;
/// nothing there is `WouldBlock`, so that tokio's `try_io` clears the socket's readiness.
fn peek_fd(fd: &impl AsFd) -> io::Result<usize> {
    let mut byte = [0u8; 1];
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    recv(fd.as_fd().as_raw_fd(), &mut byte, flags).map_err(io::Error::from)
}

/// What waits unread in `stream`'s socket now, looked at without reading it and whatever
/// tokio knows of its readiness (a socket just accepted has none yet). Unlike
/// [`Stream::waiting`] it leaves the readiness as it is: not for a loop that waits on it.
pub(crate) fn peek(stream: &impl AsFd) -> Waiting {
    waiting(peek_fd(stream))
}

/// [`peek`] of the socket whose descriptor is `fd`, for a connection whose stream hyper owns
/// (the caller keeps the stream alive while it looks).
pub(crate) fn peek_raw(fd: RawFd) -> Waiting {
    let mut byte = [0u8; 1];
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT;
    waiting(recv(fd, &mut byte, flags).map_err(io::Error::from))
}

/// What a peek found, as [`Waiting`].
fn waiting(peeked: io::Result<usize>) -> Waiting {
    match peeked {
        Ok(0) => Waiting::Closed,
        Ok(_) => Waiting::Bytes,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Waiting::Nothing
        }
        Err(_) => Waiting::Closed,
    }
}
