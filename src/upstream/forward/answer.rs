//! The answer to one of the forwarder's POSTs, read the same way whether it came on the
//! forwarder's own HTTP/1.1 connection (`h1`) or through reqwest.

use http::{StatusCode, header};

use super::h1;

/// The answer to a call's POST, from the forwarder's own connection or from reqwest.
pub(super) enum Answer<'a> {
    Own(h1::Answer<'a>),
    Reqwest(reqwest::Response),
}

impl Answer<'_> {
    pub(super) fn status(&self) -> StatusCode {
        match self {
            Answer::Own(answer) => answer.status,
            Answer::Reqwest(response) => response.status(),
        }
    }

    pub(super) fn headers(&self) -> &http::HeaderMap {
        match self {
            Answer::Own(answer) => &answer.headers,
            Answer::Reqwest(response) => response.headers(),
        }
    }

    /// Reads what is left of the body, for at most `limit`, so that the forwarder's own
    /// connection is kept for the next call (`h1` keeps only a connection read to its end). A
    /// 2026-07-28 upstream ends an SSE answer stream just after the answer, often in a packet
    /// of its own: dropped unread, 3 to 7 calls in 100 opened a new connection at 16 clients
    /// (BENCHMARKS.md).
    pub(super) async fn finish_within(&mut self, limit: std::time::Duration) {
        if let Answer::Own(answer) = self {
            let rest = async { while let Ok(Some(_)) = answer.chunk().await {} };
            let _ = tokio::time::timeout(limit, rest).await;
        }
    }

    /// The next piece of the body, `None` at its end.
    pub(super) async fn chunk(&mut self) -> Result<Option<Chunk<'_>>, String> {
        match self {
            Answer::Own(answer) => match answer.chunk().await {
                Ok(piece) => Ok(piece.map(Chunk::Borrowed)),
                Err(e) => Err(e.to_string()),
            },
            Answer::Reqwest(response) => match response.chunk().await {
                Ok(piece) => Ok(piece.map(Chunk::Owned)),
                Err(e) => Err(e.to_string()),
            },
        }
    }
}

/// A piece of an answer's body.
pub(super) enum Chunk<'a> {
    Borrowed(&'a [u8]),
    Owned(axum::body::Bytes),
}

impl std::ops::Deref for Chunk<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Chunk::Borrowed(bytes) => bytes,
            Chunk::Owned(bytes) => bytes,
        }
    }
}

/// The media type of an answer (`application/json`, `text/event-stream`), lower case.
pub(super) fn media_type(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(
        value
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase(),
    )
}
