//! The connection's socket as hyper sees it, with every read and write noted on the
//! connection's [`Activity`]: bytes that moved restart the idle clock (and bytes read say the
//! peer has spoken), a write that finds the socket full means the peer is not reading.

use crate::activity::Activity;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `S` with its traffic noted on an [`Activity`].
pub(crate) struct Metered<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Metered<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Metered<S> {
        Metered { inner, activity }
    }

    /// Notes a write's outcome: progress restarts the idle clock, a full socket means the peer
    /// owes a read.
    fn wrote(&self, polled: &Poll<io::Result<usize>>) {
        match polled {
            Poll::Pending => self.activity.set_write_blocked(true),
            Poll::Ready(Ok(n)) => {
                self.activity.set_write_blocked(false);
                if *n > 0 {
                    self.activity.moved();
                }
            }
            Poll::Ready(Err(_)) => self.activity.set_write_blocked(false),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.heard();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.wrote(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::activity::{InFlight, Rank};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_write_into_a_full_socket_marks_the_peer_as_owing_a_read() {
        let (ours, mut theirs) = tokio::io::duplex(16);
        let activity = Arc::new(Activity::new());
        let _request = InFlight::start(Arc::clone(&activity));
        let mut metered = Metered::new(ours, Arc::clone(&activity));
        metered.write_all(&[7; 16]).await.unwrap();
        assert_eq!(activity.rank(), Rank::Busy);
        // The pipe is full: the next write waits on the peer.
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let polled = Pin::new(&mut metered).poll_write(&mut cx, &[8]);
        assert!(polled.is_pending());
        assert!(activity.owes());
        tokio::time::advance(std::time::Duration::from_millis(crate::SLOW_PEER_QUIET_MS)).await;
        assert_eq!(activity.rank(), Rank::WaitsOnPeer);
        // The peer reads; the write goes through and nothing is owed.
        let mut read = [0; 16];
        theirs.read_exact(&mut read).await.unwrap();
        metered.write_all(&[8]).await.unwrap();
        assert_eq!(activity.rank(), Rank::Busy);
    }
}
