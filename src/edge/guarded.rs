//! A response whose body holds a guard until it has been sent (or dropped, the client gone):
//! what an answer holds while it is under way (request ids in flight, an SSE stream's place in
//! its caller's count) is released when the answer ends, not when the handler returns it (an
//! SSE stream is written long after).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// `response`, holding `guard` until its body is sent or dropped.
pub fn until_sent<G: Send + Unpin + 'static>(response: Response, guard: G) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Guarded {
            inner: body,
            _guard: guard,
        }),
    )
}

/// The body it wraps, its length included (a JSON answer keeps its `Content-Length`), plus a
/// guard dropped with it.
struct Guarded<G> {
    inner: Body,
    _guard: G,
}

impl<G: Unpin> http_body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
