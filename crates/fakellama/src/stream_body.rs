//! The body of a streamed answer: frames a task sends, in order, and an end that comes only
//! after the last frame was taken.
//!
//! `http_body_util::channel::Channel` could end the body while a frame sent just before its
//! sender was dropped was still unread (it looks at "closed" and "data" in two steps), so the
//! double lost the last event of a stream about once in three thousand: a stream without
//! `[DONE]`, which llama-server never sends. An mpsc queue ends only once it is empty and
//! every sender is gone, so nothing sent is ever lost.

use bytes::Bytes;
use hyper::body::{Body, Frame};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Where a streaming task sends its frames; dropping it ends the body after the last one.
pub type FrameSender = mpsc::Sender<Bytes>;

/// The body side of [`stream_body`]: the frames sent, in order, then the end.
#[derive(Debug)]
pub struct FrameBody {
    receiver: mpsc::Receiver<Bytes>,
}

impl Body for FrameBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        // `None` only once the queue is empty and every sender is gone.
        self.receiver
            .poll_recv(cx)
            .map(|data| data.map(|data| Ok(Frame::data(data))))
    }
}

/// A body fed through the returned sender, buffering up to `buffer` frames.
pub fn stream_body(buffer: usize) -> (FrameSender, FrameBody) {
    let (sender, receiver) = mpsc::channel(buffer.max(1));
    (sender, FrameBody { receiver })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::{Arc, Barrier};
    use std::task::Waker;

    /// `fut`'s output, which must be ready at once.
    fn now<F: std::future::Future>(fut: F) -> F::Output {
        let mut fut = std::pin::pin!(fut);
        match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => unreachable!("a send into an empty queue is ready at once"),
        }
    }

    /// A sender on another thread sends one frame and goes away while the body is polled
    /// without pause: the race that made `Channel` end a body before its last frame (a third of
    /// the rounds lost it there). Every round must give the frame.
    #[test]
    fn a_body_never_ends_before_its_last_frame() {
        const ROUNDS: usize = 500;
        let mut lost = 0;
        for _ in 0..ROUNDS {
            let (sender, mut body) = stream_body(4);
            let start = Arc::new(Barrier::new(2));
            let go = Arc::clone(&start);
            let sending = std::thread::spawn(move || {
                go.wait();
                now(sender.send(Bytes::from_static(b"data: [DONE]\n\n"))).unwrap();
            });
            start.wait();
            let mut cx = Context::from_waker(Waker::noop());
            let mut got = false;
            loop {
                match Pin::new(&mut body).poll_frame(&mut cx) {
                    Poll::Ready(Some(_)) => got = true,
                    Poll::Ready(None) => break,
                    Poll::Pending => std::hint::spin_loop(),
                }
            }
            sending.join().unwrap();
            lost += usize::from(!got);
        }
        assert_eq!(
            lost, 0,
            "{lost} of {ROUNDS} bodies ended before their last frame"
        );
    }
}
