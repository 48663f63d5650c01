//! A TCP stream that asks the kernel to acknowledge at once (`TCP_QUICKACK`) before each
//! read, so that a connection kept between requests does not wait on the server's Nagle.
//!
//! A server that leaves Nagle's algorithm on (llama-server's HTTP library does by default)
//! holds each small write of an answer while an earlier one is unacknowledged. A new
//! connection starts in quick-ACK mode, but a reused one has left it: the client delays its
//! ACKs, and every call waited some 40 ms (`cargo bench -p e2e --bench warm_turn`: 48 ms a turn
//! instead of 4). Linux leaves quick-ACK mode again by itself, hence before every read.

use socket2::SockRef;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A [`TcpStream`] in quick-ACK mode before each read.
#[derive(Debug)]
pub struct QuickAck(TcpStream);

impl QuickAck {
    /// `stream`, acknowledging at once.
    pub fn new(stream: TcpStream) -> QuickAck {
        QuickAck(stream)
    }
}

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // A failure only costs the delayed ACK it would have saved.
        let _ = SockRef::from(&self.0).set_tcp_quickack(true);
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
