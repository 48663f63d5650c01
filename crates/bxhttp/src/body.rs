//! The bodies between hyper and a [`crate::Handler`]: a request body that tells the
//! connection when the handler waits on the peer for bytes, and an answer body that keeps
//! its request counted in flight until it is sent.

use crate::activity::{Activity, InFlight};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A request's body as a [`crate::Handler`] reads it: hyper's, plus a note to the connection
/// while the handler waits for bytes the peer has not sent (which the idle timeout counts).
#[derive(Debug)]
pub struct RequestBody {
    inner: Incoming,
    activity: Arc<Activity>,
}

impl RequestBody {
    pub(crate) fn new(inner: Incoming, activity: Arc<Activity>) -> RequestBody {
        RequestBody { inner, activity }
    }
}

impl Body for RequestBody {
    type Data = <Incoming as Body>::Data;
    type Error = <Incoming as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        self.activity.set_awaiting_body(polled.is_pending());
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        // A body the handler let go of is owed no more.
        self.activity.set_awaiting_body(false);
    }
}

/// An answer's body with its request's [`InFlight`] count: hyper drops it once the body is
/// sent or the connection is gone.
pub(crate) struct ResponseBody<B> {
    inner: B,
    _in_flight: InFlight,
}

impl<B> ResponseBody<B> {
    pub fn new(inner: B, in_flight: InFlight) -> ResponseBody<B> {
        ResponseBody {
            inner,
            _in_flight: in_flight,
        }
    }
}

impl<B: Body + Unpin> Body for ResponseBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
