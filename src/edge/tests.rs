use super::*;

/// A body that breaks off with an error, as hyper's does on bad chunked framing.
struct Broken;

impl futures_core::Stream for Broken {
    type Item = Result<axum::body::Bytes, std::io::Error>;
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(Some(Err(std::io::Error::other("invalid chunk size"))))
    }
}

/// Proves: a body over the limit is told from a body that breaks off (413 vs 400); the
/// gateway test sends the latter for real, this one covers the chunked body over the limit.
#[tokio::test]
async fn a_body_over_the_limit_is_told_from_a_broken_one() {
    let over = axum::body::to_bytes(axum::body::Body::from(vec![b'x'; 100]), 10).await;
    assert!(over_limit(&over.expect_err("over the limit")));
    let broken = axum::body::to_bytes(axum::body::Body::from_stream(Broken), 10).await;
    assert!(!over_limit(&broken.expect_err("broken")));
}
