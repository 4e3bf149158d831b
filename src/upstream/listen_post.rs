//! The POST of a `subscriptions/listen` request, read as whichever kind of stream the upstream
//! answers with.
//!
//! The 2026-07-28 transport answers a listen request with an SSE stream, which rmcp's client
//! reads. Some servers answer it with newline-delimited JSON instead (`Content-Type:
//! application/json`, one message a line, the body kept open): the conformance suite's own
//! reference server does. rmcp reads an `application/json` body to its end, which such a stream
//! never reaches, so the acknowledgment never came and the stream was never open. Here the
//! listen POST is sent as rmcp sends it, and a JSON body is handed to rmcp as a stream of
//! events, one a line. That server also quotes the request's id in each message's
//! `io.modelcontextprotocol/subscriptionId` (`"7"` for the request `7`), which rmcp takes for
//! another subscription's; such an id is given back its number.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_core::Stream;
use http::{HeaderName, HeaderValue, header};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, NumberOrString, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::streamable_http_client::{StreamableHttpError, StreamableHttpPostResponse};
use sse_stream::{Error as SseError, Sse, SseStream};

/// The largest message a line may carry, as rmcp's own limit for SSE events.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// The largest error body read (a refusal is a JSON-RPC error).
const MAX_ERROR_BYTES: usize = 64 * 1024;

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// Whether `message` is a `subscriptions/listen` request.
pub fn is_listen(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Request(request)
            if matches!(request.request, ClientRequest::SubscriptionsListenRequest(_))
    )
}

/// Posts `message` (a listen request) as rmcp's client does, and reads the answer as SSE or as
/// newline-delimited JSON.
pub async fn post(
    http: &reqwest::Client,
    uri: Arc<str>,
    message: ClientJsonRpcMessage,
    session_id: Option<Arc<str>>,
    auth_header: Option<String>,
    custom_headers: HashMap<HeaderName, HeaderValue>,
) -> PostResult {
    let mut request = http
        .post(uri.as_ref())
        .header(header::ACCEPT, "text/event-stream, application/json");
    if let Some(token) = auth_header {
        request = request.bearer_auth(token);
    }
    for (name, value) in custom_headers {
        request = request.header(name, value);
    }
    if let Some(session_id) = &session_id {
        request = request.header("mcp-session-id", session_id.as_ref());
    }
    let id = match &message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    };
    let response = request.json(&message).send().await?;
    let status = response.status();
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    if !status.is_success() {
        // A refusal: its JSON-RPC error, as rmcp would read it.
        let body = bounded_body(response).await;
        return match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
            Ok(error) => Ok(StreamableHttpPostResponse::Json(error, None)),
            Err(_) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!(
                    "HTTP {status} to subscriptions/listen: {}",
                    String::from_utf8_lossy(&body)
                ),
            ))),
        };
    }
    match kind.as_deref() {
        Some("text/event-stream") => Ok(StreamableHttpPostResponse::Sse(
            Box::pin(SseStream::from_bytes_stream(response.bytes_stream())),
            None,
        )),
        Some("application/json") => Ok(StreamableHttpPostResponse::Sse(
            Box::pin(Lines::new(response.bytes_stream(), id)),
            None,
        )),
        other => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!(
                "HTTP {status} to subscriptions/listen with content type {}",
                other.unwrap_or("(none)")
            ),
        ))),
    }
}

/// Up to [`MAX_ERROR_BYTES`] of `response`'s body.
async fn bounded_body(mut response: reqwest::Response) -> Vec<u8> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ERROR_BYTES {
            body.truncate(MAX_ERROR_BYTES);
            break;
        }
    }
    body
}

/// A byte stream of newline-delimited JSON as events, one a non-empty line.
struct Lines<S> {
    body: Pin<Box<S>>,
    buffer: Vec<u8>,
    ended: bool,
    /// The listen request's id, when it is a number (whose quoted form is given back its number).
    number: Option<i64>,
}

impl<S> Lines<S> {
    fn new(body: S, id: Option<RequestId>) -> Lines<S> {
        let number = match id {
            Some(NumberOrString::Number(n)) => Some(n),
            _ => None,
        };
        Lines {
            body: Box::pin(body),
            buffer: Vec::new(),
            ended: false,
            number,
        }
    }

    /// `text` with a quoted subscription id of the request's number unquoted.
    fn unquoted(&self, text: &str) -> String {
        const KEY: &str = "io.modelcontextprotocol/subscriptionId";
        let Some(number) = self.number else {
            return text.to_string();
        };
        let Ok(mut message) = serde_json::from_str::<serde_json::Value>(text) else {
            return text.to_string();
        };
        let Some(id) = message
            .pointer_mut("/params/_meta")
            .and_then(|meta| meta.get_mut(KEY))
        else {
            return text.to_string();
        };
        if id.as_str() != Some(number.to_string().as_str()) {
            return text.to_string();
        }
        *id = serde_json::Value::from(number);
        message.to_string()
    }

    /// The next complete line in the buffer (at the end of the body, what is left).
    fn next_line(&mut self) -> Option<Result<Sse, SseError>> {
        loop {
            let end = match self.buffer.iter().position(|b| *b == b'\n') {
                Some(at) => at + 1,
                None if self.ended && !self.buffer.is_empty() => self.buffer.len(),
                None => return None,
            };
            let line: Vec<u8> = self.buffer.drain(..end).collect();
            match std::str::from_utf8(&line) {
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => return Some(Ok(Sse::default().data(self.unquoted(text.trim())))),
                Err(error) => return Some(Err(SseError::Utf8Parse(error))),
            }
        }
    }
}

impl<S, B, E> Stream for Lines<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Sse, SseError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(line) = self.next_line() {
                return Poll::Ready(Some(line));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            match self.body.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => self.ended = true,
                Poll::Ready(Some(Err(error))) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(SseError::Body(Box::new(error)))));
                }
                Poll::Ready(Some(Ok(chunk))) => {
                    let chunk = chunk.as_ref();
                    if self.buffer.len() + chunk.len() > MAX_LINE_BYTES {
                        self.ended = true;
                        self.buffer.clear();
                        return Poll::Ready(Some(Err(SseError::InvalidLine)));
                    }
                    self.buffer.extend_from_slice(chunk);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `stream` to its end on the current thread (every chunk is ready).
    fn collect<S: Stream + Unpin>(mut stream: S) -> Vec<S::Item> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut items = Vec::new();
        while let Poll::Ready(Some(item)) = Pin::new(&mut stream).poll_next(&mut cx) {
            items.push(item);
        }
        items
    }

    /// Proves: newline-delimited JSON becomes one event per non-empty line, whatever the chunks
    /// it arrives in (a line split across two, two lines in one, a last line without its
    /// newline), and a line over the bound ends the stream with an error.
    #[test]
    fn each_line_is_an_event() {
        let chunks: Vec<Result<&[u8], std::io::Error>> =
            vec![Ok(b"{\"a\":1}\n{\"b\""), Ok(b":2}\n\n"), Ok(b"{\"c\":3}")];
        let events = collect(Lines::new(futures_stream(chunks), None));
        let data: Vec<String> = events
            .into_iter()
            .map(|e| e.ok().and_then(|e| e.data).unwrap_or_default())
            .collect();
        assert_eq!(data, [r#"{"a":1}"#, r#"{"b":2}"#, r#"{"c":3}"#]);

        let huge = vec![b'x'; MAX_LINE_BYTES + 1];
        let chunks: Vec<Result<&[u8], std::io::Error>> = vec![Ok(&huge)];
        let events = collect(Lines::new(futures_stream(chunks), None));
        assert!(matches!(events.as_slice(), [Err(SseError::InvalidLine)]));
    }

    /// Proves: a subscription id quoted from the listen request's number gets its number back
    /// (rmcp matches it to the request's id exactly); any other id, and a request with a string
    /// id, are left as they are.
    #[test]
    fn a_quoted_request_number_is_unquoted() {
        let ack = |id: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{{"io.modelcontextprotocol/subscriptionId":{id}}},"notifications":{{}}}}}}"#
            )
        };
        let read = |line: String, id: Option<RequestId>| {
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(line.into_bytes())];
            let events = collect(Lines::new(futures_stream(chunks), id));
            let data = events.into_iter().next().and_then(|e| e.ok()?.data);
            serde_json::from_str::<serde_json::Value>(&data.unwrap_or_default()).unwrap_or_default()
                ["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
                .clone()
        };
        let seven = Some(NumberOrString::Number(7));
        assert_eq!(read(ack("\"7\""), seven.clone()), serde_json::json!(7));
        assert_eq!(read(ack("\"8\""), seven.clone()), serde_json::json!("8"));
        assert_eq!(read(ack("7"), seven), serde_json::json!(7));
        let named = Some(NumberOrString::String("7".into()));
        assert_eq!(read(ack("\"7\""), named), serde_json::json!("7"));
    }

    /// A stream of `items`, each ready at once.
    fn futures_stream<T: Unpin>(items: Vec<T>) -> impl Stream<Item = T> + Unpin {
        struct Ready<T>(std::collections::VecDeque<T>);
        impl<T: Unpin> Stream for Ready<T> {
            type Item = T;
            fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<T>> {
                Poll::Ready(self.0.pop_front())
            }
        }
        Ready(items.into())
    }
}
