//! The fast path of `tools/call` to a Streamable HTTP upstream.
//!
//! rmcp's client hands each request to its service task, which hands it to the transport worker,
//! which spawns the POST and routes the answer back the same way: four task hand-offs per call,
//! the largest share of the gateway's CPU with one client (BENCHMARKS.md). The [`Forwarder`]
//! POSTs the call from the calling task instead, on the session rmcp opened (the [`SessionTap`]
//! sees its session id and headers go by), and reads the answer there.
//!
//! rmcp keeps everything else: the handshake, `tools/list`, pings, the standalone stream, and
//! re-initialising an expired session. A call the upstream answers with 404 on its session is
//! handed back ([`Forwarded::Declined`]) and goes through rmcp, whose new session the next calls
//! then use. Upstreams that negotiate 2026-07-28 or later (standard request headers) stay on
//! rmcp's path entirely.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use futures_core::stream::BoxStream;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientRequest, ErrorData,
    ProtocolVersion, RequestId,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sse_stream::Sse;
use tokio::sync::mpsc;

use super::CallError;
use super::sse::EventSplitter;

/// The largest answer read, as rmcp's own limit for JSON bodies and SSE events.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// The headers of a POST on the upstream's current session.
pub struct Session {
    /// `Mcp-Session-Id` (if the upstream gave one), `MCP-Protocol-Version`, the configured
    /// headers, and the content negotiation of a JSON-RPC POST.
    headers: HeaderMap,
    has_session_id: bool,
}

/// The session rmcp's transport last posted on, once the handshake is done.
#[derive(Default)]
pub struct SessionTap(RwLock<Option<Arc<Session>>>);

impl SessionTap {
    fn current(&self) -> Option<Arc<Session>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, session: Option<Session>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = session.map(Arc::new);
    }

    /// Forgets `session` unless rmcp has moved on to another since.
    fn forget(&self, session: &Arc<Session>) {
        let mut current = self.0.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, session)) {
            *current = None;
        }
    }

    /// Notes what rmcp posts with. The initialize request goes out before a version is
    /// negotiated, so it says nothing; every later post carries the session and the version.
    fn saw(
        &self,
        message: &ClientJsonRpcMessage,
        session_id: Option<&Arc<str>>,
        custom: &HashMap<HeaderName, HeaderValue>,
    ) {
        if let ClientJsonRpcMessage::Request(request) = message
            && matches!(request.request, ClientRequest::InitializeRequest(_))
        {
            return;
        }
        // (A `HeaderName` does not hash as its text: look it up as a `HeaderName`.)
        let version = custom
            .get(&HeaderName::from_static("mcp-protocol-version"))
            .and_then(|v| v.to_str().ok());
        // Dates in ISO form order as strings. Newer versions need per-request standard
        // headers (Mcp-Method, Mcp-Name, Mcp-Param-*), which rmcp computes: leave them to it.
        let legacy = version.is_some_and(|v| v < ProtocolVersion::STANDARD_HEADERS.as_str());
        if !legacy {
            self.set(None);
            return;
        }
        let mut headers: HeaderMap = custom.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(id) = session_id
            && let Ok(value) = HeaderValue::from_str(id)
        {
            headers.insert("mcp-session-id", value);
        }
        self.set(Some(Session {
            headers,
            has_session_id: session_id.is_some(),
        }));
    }
}

/// rmcp's HTTP client with a [`SessionTap`] on its posts.
#[derive(Clone)]
pub struct TappedClient {
    pub http: reqwest::Client,
    pub tap: Arc<SessionTap>,
}

type PostResult = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;
type StreamResult =
    Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<reqwest::Error>>;

/// rmcp posts through `post_message_with_response_limits`; `post_message` is the trait's required
/// method (the trait's default for the SSE-limit variant calls it).
impl StreamableHttpClient for TappedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> PostResult {
        self.tap.saw(&message, session_id.as_ref(), &custom_headers);
        self.http
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> PostResult {
        self.tap.saw(&message, session_id.as_ref(), &custom_headers);
        self.http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.tap.set(None);
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> StreamResult {
        self.http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> StreamResult {
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// What became of a call offered to the [`Forwarder`].
pub enum Forwarded {
    Answered(Result<CallToolResult, CallError>),
    /// Not sent (no session yet), or refused by the upstream as on an expired session: nothing
    /// ran, rmcp must send it.
    Declined,
}

/// Sends `tools/call` on rmcp's session from the calling task.
pub struct Forwarder {
    upstream: String,
    url: reqwest::Url,
    http: reqwest::Client,
    tap: Arc<SessionTap>,
    /// Told when the answer stream carries `notifications/tools/list_changed`.
    tools_changed: mpsc::UnboundedSender<()>,
    /// Our request ids are strings (`narrowgate-N`) and rmcp's are numbers: the two never clash
    /// on the shared session.
    next_id: AtomicU64,
}

#[derive(Serialize)]
struct OutgoingCall<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'static str,
    params: &'a CallToolRequestParams,
}

/// One message of the answer: our response, a notification, or a request to the client.
#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<CallToolResult>,
    #[serde(default)]
    error: Option<ErrorData>,
}

impl Forwarder {
    pub fn new(
        upstream: &str,
        url: reqwest::Url,
        client: &TappedClient,
        tools_changed: mpsc::UnboundedSender<()>,
    ) -> Forwarder {
        Forwarder {
            upstream: upstream.to_string(),
            url,
            http: client.http.clone(),
            tap: client.tap.clone(),
            tools_changed,
            next_id: AtomicU64::new(1),
        }
    }

    /// Sends the call and reads its answer, or declines it when rmcp must send it.
    pub async fn call(&self, params: &CallToolRequestParams) -> Forwarded {
        let Some(session) = self.tap.current() else {
            return Forwarded::Declined;
        };
        let id = RequestId::String(
            format!(
                "narrowgate-{}",
                self.next_id.fetch_add(1, Ordering::Relaxed)
            )
            .into(),
        );
        let body = match serde_json::to_vec(&OutgoingCall {
            jsonrpc: "2.0",
            id: &id,
            method: "tools/call",
            params,
        }) {
            Ok(body) => body,
            Err(_) => return Forwarded::Declined,
        };
        let sent = self
            .http
            .post(self.url.clone())
            .headers(session.headers.clone())
            .body(body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) => return Forwarded::Answered(Err(self.lost(&error))),
        };
        if response.status() == StatusCode::NOT_FOUND && session.has_session_id {
            tracing::debug!(upstream = %self.upstream, "session expired: the call goes through a new one");
            self.tap.forget(&session);
            return Forwarded::Declined;
        }
        Forwarded::Answered(self.read_answer(response, &id, &session).await)
    }

    async fn read_answer(
        &self,
        mut response: reqwest::Response,
        id: &RequestId,
        session: &Arc<Session>,
    ) -> Result<CallToolResult, CallError> {
        let status = response.status();
        let media_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        match media_type.as_deref() {
            Some("application/json") => {
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await.map_err(|e| self.lost(&e))? {
                    if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                        return Err(self.lost(&"the answer is larger than 16 MiB"));
                    }
                    body.extend_from_slice(&chunk);
                }
                match self.on_message(&body, id, session) {
                    Some(answer) => answer,
                    None => Err(self.lost(&format!("HTTP {status} without the call's answer"))),
                }
            }
            Some("text/event-stream") if status.is_success() => {
                let mut events = EventSplitter::new(MAX_ANSWER_BYTES);
                let mut answer = None;
                while let Some(chunk) = response.chunk().await.map_err(|e| self.lost(&e))? {
                    events
                        .feed(&chunk, |data| {
                            answer = self.on_message(data, id, session);
                            answer.is_none()
                        })
                        .map_err(|_| self.lost(&"an event is larger than 16 MiB"))?;
                    if let Some(answer) = answer {
                        return answer;
                    }
                }
                Err(self.lost(&"the answer stream ended before the answer"))
            }
            _ => Err(self.lost(&format!("HTTP {status} without a JSON-RPC answer"))),
        }
    }

    /// Handles one message of the answer; returns the call's answer when this is it.
    fn on_message(
        &self,
        data: &[u8],
        id: &RequestId,
        session: &Arc<Session>,
    ) -> Option<Result<CallToolResult, CallError>> {
        if data.is_empty() {
            return None;
        }
        let message: Incoming = match serde_json::from_slice(data) {
            Ok(message) => message,
            Err(error) => {
                tracing::warn!(upstream = %self.upstream, %error, "ignoring a malformed message");
                return None;
            }
        };
        match (message.method, message.id) {
            (Some(method), Some(request)) => {
                self.reply(session, request, &method);
                None
            }
            (Some(method), None) => {
                if method == "notifications/tools/list_changed" {
                    let _ = self.tools_changed.send(());
                }
                None
            }
            (None, answered) if answered.as_ref().is_none_or(|a| a == id) => {
                match (message.result, message.error) {
                    (Some(result), _) => Some(Ok(result)),
                    (None, Some(error)) => Some(Err(CallError::Protocol(error))),
                    (None, None) => Some(Err(self.lost(&"an answer without result or error"))),
                }
            }
            (None, _) => None,
        }
    }

    /// Answers a request the upstream makes while the call runs (in the background: the
    /// upstream may wait for it before it answers the call).
    fn reply(&self, session: &Arc<Session>, request: RequestId, method: &str) {
        let post = self
            .http
            .post(self.url.clone())
            .headers(session.headers.clone())
            .body(reply_to(request, method).to_string());
        let upstream = self.upstream.clone();
        tokio::spawn(async move {
            if let Err(error) = post.send().await {
                tracing::warn!(%upstream, %error, "could not answer the upstream's request");
            }
        });
    }

    /// The transport failed: log why, answer plainly (as rmcp's path does).
    fn lost(&self, why: &dyn std::fmt::Display) -> CallError {
        tracing::warn!(upstream = %self.upstream, error = %why, "call failed: connection lost");
        CallError::ConnectionLost(self.upstream.clone())
    }
}

/// The answer rmcp's default client handler gives to a request from the upstream (the gateway
/// declares no client capabilities, so only `ping` is expected).
fn reply_to(request: RequestId, method: &str) -> Value {
    let (key, value) = match method {
        "ping" => ("result", json!({})),
        "roots/list" => ("result", json!({ "roots": [] })),
        "elicitation/create" => ("result", json!({ "action": "decline" })),
        _ => (
            "error",
            json!({ "code": -32601, "message": format!("Method not found: {method}") }),
        ),
    };
    json!({ "jsonrpc": "2.0", "id": request, key: value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarder() -> (Forwarder, mpsc::UnboundedReceiver<()>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let client = TappedClient {
            http: reqwest::Client::new(),
            tap: Arc::new(SessionTap::default()),
        };
        let url = reqwest::Url::parse("http://127.0.0.1:9/mcp").expect("a URL");
        (Forwarder::new("demo", url, &client, tx), rx)
    }

    fn session() -> Arc<Session> {
        Arc::new(Session {
            headers: HeaderMap::new(),
            has_session_id: true,
        })
    }

    /// Proves: of the messages an answer stream carries, only the response to this call's id
    /// ends it (a result, or a JSON-RPC error kept as a protocol error); a list_changed
    /// notification is passed on; responses to other ids and malformed data are skipped.
    #[test]
    fn only_the_calls_own_response_answers_it() {
        let (forwarder, mut changed) = forwarder();
        let ours = RequestId::String("narrowgate-7".into());
        let session = session();
        let answer = |data: &str| forwarder.on_message(data.as_bytes(), &ours, &session);

        assert!(answer("").is_none());
        assert!(answer("{not json").is_none());
        assert!(
            answer(r#"{"jsonrpc":"2.0","id":"narrowgate-6","result":{"content":[]}}"#).is_none()
        );
        assert!(answer(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#).is_none());
        assert!(changed.try_recv().is_err());
        assert!(
            answer(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#).is_none()
        );
        assert!(changed.try_recv().is_ok());

        let ok = answer(
            r#"{"jsonrpc":"2.0","id":"narrowgate-7","result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
        );
        match ok {
            Some(Ok(result)) => assert_eq!(result.is_error, Some(false)),
            other => panic!("expected the result: {other:?}"),
        }
        let refused = answer(
            r#"{"jsonrpc":"2.0","id":"narrowgate-7","error":{"code":-32602,"message":"Unknown tool: x"}}"#,
        );
        match refused {
            Some(Err(CallError::Protocol(error))) => assert_eq!(error.code.0, -32602),
            other => panic!("expected a protocol error: {other:?}"),
        }
    }

    /// Proves: requests from the upstream get the answers rmcp's default client handler gives,
    /// with their own id.
    #[test]
    fn upstream_requests_get_rmcps_default_answers() {
        let id = RequestId::Number(4);
        assert_eq!(
            reply_to(id.clone(), "ping"),
            json!({"jsonrpc": "2.0", "id": 4, "result": {}})
        );
        assert_eq!(
            reply_to(id.clone(), "elicitation/create")["result"]["action"],
            "decline"
        );
        assert_eq!(
            reply_to(id, "sampling/createMessage")["error"]["code"],
            -32601
        );
    }
}
