//! The session rmcp's HTTP client opened with an upstream, seen from outside: [`TappedClient`]
//! wraps rmcp's reqwest-based `StreamableHttpClient` and notes, in a [`SessionTap`], the session
//! id and headers of every post rmcp makes once the handshake is done. The forwarder
//! (`forward.rs`) sends `tools/call` on that session.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use futures_core::stream::BoxStream;
use http::{HeaderMap, HeaderName, HeaderValue, header};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ProtocolVersion};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// The headers of a POST on the upstream's current session.
pub struct Session {
    /// `Mcp-Session-Id` (if the upstream gave one), `MCP-Protocol-Version`, the configured
    /// headers, and the content negotiation of a JSON-RPC POST.
    pub headers: HeaderMap,
    pub has_session_id: bool,
    /// The upstream negotiated 2026-07-28 or later: no session, and each call says what it is
    /// (`Mcp-Method`, `Mcp-Name`, and the client's identity in `_meta`: `forward.rs`).
    pub stateless: bool,
}

/// The session rmcp's transport last posted on successfully, once the handshake is done.
#[derive(Default)]
pub struct SessionTap(RwLock<Option<Arc<Session>>>);

impl SessionTap {
    pub fn current(&self) -> Option<Arc<Session>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn set(&self, session: Option<Session>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = session.map(Arc::new);
    }

    /// Forgets `session` unless rmcp has moved on to another since.
    pub fn forget(&self, session: &Arc<Session>) {
        let mut current = self.0.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, session)) {
            *current = None;
        }
    }
}

/// What a post of rmcp's says about the session: nothing (`None`: the initialize request goes
/// out before there is a session or a version), or the session to use (`Some(None)`: none the
/// forwarder can use).
fn session_of(
    message: &ClientJsonRpcMessage,
    session_id: Option<&Arc<str>>,
    auth_header: Option<&String>,
    custom: &HashMap<HeaderName, HeaderValue>,
) -> Option<Option<Session>> {
    if let ClientJsonRpcMessage::Request(request) = message
        && matches!(
            request.request,
            ClientRequest::InitializeRequest(_) | ClientRequest::DiscoverRequest(_)
        )
    {
        return None;
    }
    // (A `HeaderName` does not hash as its text: look it up as a `HeaderName`.)
    let version = custom
        .get(&HeaderName::from_static("mcp-protocol-version"))
        .and_then(|v| v.to_str().ok());
    // Dates in ISO form order as strings. Newer versions are stateless and need per-request
    // standard headers: the forwarder adds `Mcp-Method` and `Mcp-Name` to each call, and the
    // ones rmcp computed for this post are left out. The gateway configures credentials as
    // headers; a bearer token of rmcp's own would not be sent.
    let Some(version) = version else {
        return Some(None);
    };
    if auth_header.is_some() {
        return Some(None);
    }
    let stateless = version >= ProtocolVersion::STANDARD_HEADERS.as_str();
    let mut headers: HeaderMap = custom
        .iter()
        .filter(|(k, _)| !(stateless && is_per_request(k)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
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
    Some(Some(Session {
        headers,
        has_session_id: session_id.is_some(),
        stateless,
    }))
}

/// The standard headers that describe one request (SEP-2243), not the connection.
fn is_per_request(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "mcp-method" || name == "mcp-name" || name.starts_with("mcp-param-")
}

/// rmcp's HTTP client with a [`SessionTap`] on its posts.
#[derive(Clone)]
pub struct TappedClient {
    pub http: reqwest::Client,
    pub tap: Arc<SessionTap>,
}

impl TappedClient {
    /// Posts as rmcp asked, and notes the session once the upstream has accepted the post (after
    /// a re-initialisation, `tools/call` must not go out before `initialized` has been taken).
    async fn tapped(
        &self,
        session: Option<Option<Session>>,
        post: impl Future<Output = PostResult>,
    ) -> PostResult {
        let answer = post.await;
        if let (Ok(_), Some(session)) = (&answer, session) {
            self.tap.set(session);
        }
        answer
    }
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
        let session = session_of(
            &message,
            session_id.as_ref(),
            auth_header.as_ref(),
            &custom_headers,
        );
        let post = self
            .http
            .post_message(uri, message, session_id, auth_header, custom_headers);
        self.tapped(session, post).await
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
        let session = session_of(
            &message,
            session_id.as_ref(),
            auth_header.as_ref(),
            &custom_headers,
        );
        // A listen stream may come as newline-delimited JSON, which rmcp cannot read.
        if super::listen_post::is_listen(&message) {
            let post = super::listen_post::post(
                &self.http,
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
            );
            return self.tapped(session, post).await;
        }
        let post = self.http.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        );
        self.tapped(session, post).await
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
