//! The fast path of `tools/call` to a Streamable HTTP upstream.
//!
//! rmcp's client hands each request to its service task, which hands it to the transport worker,
//! which spawns the POST and routes the answer back the same way: four task hand-offs per call,
//! the largest share of the gateway's CPU with one client (BENCHMARKS.md). The [`Forwarder`]
//! POSTs the call from the calling task instead (on connections of its own for `http://`
//! upstreams, see `h1.rs`; through reqwest otherwise), on the session rmcp opened (the
//! [`SessionTap`] sees its session id and headers go by), and reads the answer there, as rmcp's
//! client would: a JSON body or an SSE stream (resumed with `Last-Event-ID` if it closes early),
//! answering requests the upstream makes meanwhile (a bounded number at a time: a flood of them
//! must not become a socket each), passing `tools/list_changed` on, and sending
//! `notifications/cancelled` for a call given up on (a timeout).
//!
//! rmcp keeps everything else: the handshake, `tools/list`, pings, the standalone stream, and
//! re-initialising an expired session. A call the upstream answers with 404 on its session is
//! handed back ([`Forwarded::Declined`]) and goes through rmcp, whose new session the next calls
//! then use. An upstream that negotiated 2026-07-28 or later has no session: each call goes
//! alone, saying what it is in the standard headers (`Mcp-Method`, `Mcp-Name`) and who sends it
//! in `_meta` (protocol version, client info and capabilities), as rmcp's client would send it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{HeaderValue, StatusCode, header};
#[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28; 2025 upstreams log
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ErrorData,
    LoggingMessageNotificationParam, MetaObject, RequestId, RequestMetaObject, ServerResult,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::CallError;
use super::h1::{self, Http1Client};
use super::mrtr;
use super::relay::{self, ProgressRoutes};
use super::sse::EventSplitter;
use super::tap::{Session, SessionTap, TappedClient};

/// The largest answer read, as rmcp's own limit for JSON bodies and SSE events.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// How often an answer stream that closed before the answer is resumed.
const MAX_RESUMES: u32 = 3;
/// The longest wait before resuming, whatever the stream's `retry:` asks.
const MAX_RESUME_DELAY: Duration = Duration::from_secs(5);
/// Bound on the small messages the forwarder sends on its own (answers, cancellations).
const NOTICE_TIMEOUT: Duration = Duration::from_secs(10);
/// Answers to the upstream's requests being posted at once, per upstream: each may hold a
/// connection, and an upstream sending 20,000 pings must not get 20,000 sockets.
const MAX_REPLIES_POSTING: usize = 16;
/// Answers waiting for their turn, per upstream; requests beyond these are not answered (and
/// counted in the log): an upstream that floods gets no answer to the flood.
const MAX_REPLIES_WAITING: usize = 256;

/// What became of one round of a call.
enum Sent {
    Answered(Result<Reply, CallError>),
    Declined,
}

/// The upstream's answer to one round: the tool's result, or a request for input (`mrtr`).
#[derive(Debug)]
enum Reply {
    Complete(CallToolResult),
    InputRequired(mrtr::InputRequired),
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
    /// The calls' own connections, for a plain-HTTP upstream (reqwest otherwise).
    h1: Option<Http1Client>,
    tap: Arc<SessionTap>,
    /// Told when the answer stream carries `notifications/tools/list_changed`.
    tools_changed: Arc<Notify>,
    /// Our request ids are strings (`narrowgate-N`) and rmcp's are numbers: the two never clash
    /// on the shared session.
    next_id: AtomicU64,
    /// Bounds on the answers to the upstream's requests (see [`MAX_REPLIES_WAITING`]).
    replies: Arc<Replies>,
    /// Where the answer stream's `notifications/progress` go (`relay`).
    progress: Arc<ProgressRoutes>,
    /// What a stateless (2026-07-28) call carries in `_meta` about its sender.
    stateless_meta: serde_json::Map<String, Value>,
}

/// The answers to an upstream's requests under way, bounded.
struct Replies {
    /// A permit per answer waiting or posting ([`MAX_REPLIES_WAITING`]).
    waiting: Arc<tokio::sync::Semaphore>,
    /// A permit per answer posting ([`MAX_REPLIES_POSTING`]).
    posting: tokio::sync::Semaphore,
    /// Requests left unanswered because too many answers were under way.
    unanswered: AtomicU64,
}

#[derive(Serialize)]
struct OutgoingCall<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'static str,
    params: &'a CallToolRequestParams,
}

/// One message of the answer: our response, a notification, or a request to the client. The
/// result is read as a tool result only once it is known to be ours.
#[derive(Deserialize)]
struct Incoming {
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ErrorData>,
    /// A request's parameters (read only for the requests relayed to the client).
    #[serde(default)]
    params: Option<Box<RawValue>>,
}

/// Sends `notifications/cancelled` for the call if it is dropped before its answer was read
/// (the attempt timed out), as rmcp's client does: an upstream must not run on for nobody.
struct CancelUnlessAnswered<'a> {
    armed: bool,
    forwarder: &'a Forwarder,
    session: &'a Session,
    id: &'a RequestId,
}

impl Drop for CancelUnlessAnswered<'_> {
    fn drop(&mut self) {
        // Answered (every call that completes): nothing to do. On a stateless (2026-07-28)
        // upstream, closing the answer stream (dropping it, which closes its connection) is
        // the cancellation, and `notifications/cancelled` is not expected.
        if !self.armed || self.session.stateless {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let post = self.forwarder.notice(
            self.session,
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": self.id, "reason": "the gateway's client cancelled the call, or it timed out"}}),
        );
        let upstream = self.forwarder.upstream.clone();
        runtime.spawn(async move {
            if let Err(error) = post.send().await {
                tracing::warn!(%upstream, %error, "could not cancel an abandoned call");
            }
        });
    }
}

impl Forwarder {
    pub fn new(
        upstream: &str,
        url: reqwest::Url,
        client: &TappedClient,
        tools_changed: Arc<Notify>,
        progress: Arc<ProgressRoutes>,
    ) -> Forwarder {
        Forwarder {
            upstream: upstream.to_string(),
            h1: Http1Client::for_url(&url),
            url,
            http: client.http.clone(),
            tap: client.tap.clone(),
            tools_changed,
            next_id: AtomicU64::new(1),
            replies: Arc::new(Replies {
                waiting: Arc::new(tokio::sync::Semaphore::new(MAX_REPLIES_WAITING)),
                posting: tokio::sync::Semaphore::new(MAX_REPLIES_POSTING),
                unanswered: AtomicU64::new(0),
            }),
            progress,
            stateless_meta: serde_json::Map::new(),
        }
    }

    /// The same forwarder, telling a stateless (2026-07-28) upstream in each call's `_meta`
    /// that `client` sends it, as rmcp's client says it in every request.
    pub fn identified_as(mut self, client: &ClientConfig) -> Forwarder {
        let meta = &mut self.stateless_meta;
        meta.insert(
            "io.modelcontextprotocol/protocolVersion".into(),
            json!(rmcp::model::ProtocolVersion::V_2026_07_28),
        );
        meta.insert(
            "io.modelcontextprotocol/clientInfo".into(),
            json!(client.client_info),
        );
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            json!(client.capabilities),
        );
        // 2026-07-28 has no `logging/setLevel`: the level goes with each request. Every level,
        // as the gateway asks of a legacy upstream (`relay::ask_for_every_log`); each client
        // hears only what its own level lets through.
        meta.insert("io.modelcontextprotocol/logLevel".into(), json!("debug"));
        self
    }

    /// Sends the call and reads its answer, or declines it when rmcp must send it. An upstream
    /// that answers with an `InputRequiredResult` (2026-07-28) gets the call again with the
    /// calling client's answers (`mrtr`). A stateless call gets the sender's `_meta` keys added
    /// to `params` in place (no copy).
    pub async fn call(&self, params: &mut CallToolRequestParams) -> Forwarded {
        mrtr::clear(params);
        let mut round = 0;
        loop {
            let required = match self.call_once(params).await {
                Sent::Answered(Ok(Reply::Complete(result))) => {
                    return Forwarded::Answered(Ok(result));
                }
                Sent::Answered(Ok(Reply::InputRequired(required))) => required,
                Sent::Answered(Err(error)) => return Forwarded::Answered(Err(error)),
                Sent::Declined => return Forwarded::Declined,
            };
            round += 1;
            let call = relay::current();
            if let Err(failed) =
                mrtr::answer_round(&self.upstream, required, round, call, params).await
            {
                return Forwarded::Answered(Ok(failed));
            }
        }
    }

    /// One round of the call: sends it and reads its answer.
    async fn call_once(&self, params: &mut CallToolRequestParams) -> Sent {
        let Some(session) = self.tap.current() else {
            return Sent::Declined;
        };
        let id = RequestId::String(
            format!(
                "narrowgate-{}",
                self.next_id.fetch_add(1, Ordering::Relaxed)
            )
            .into(),
        );
        let stateless = if session.stateless {
            match self.stateless(&session, params) {
                Some(headers) => Some(headers),
                None => return Sent::Declined,
            }
        } else {
            None
        };
        let headers = stateless.as_ref().unwrap_or(&session.headers);
        let params = &*params;
        let body = match serde_json::to_vec(&OutgoingCall {
            jsonrpc: "2.0",
            id: &id,
            method: "tools/call",
            params,
        }) {
            Ok(body) => body,
            Err(_) => return Sent::Declined,
        };
        let mut cancel = CancelUnlessAnswered {
            armed: true,
            forwarder: self,
            session: &session,
            id: &id,
        };
        let sent = match &self.h1 {
            Some(h1) => h1
                .post(headers, &body)
                .await
                .map(Answer::Own)
                .map_err(|e| self.lost(&e)),
            None => self
                .http
                .post(self.url.clone())
                .headers(headers.clone())
                .body(body)
                .send()
                .await
                .map(Answer::Reqwest)
                .map_err(|e| self.lost(&e)),
        };
        let answer = match sent {
            Err(lost) => Sent::Answered(Err(lost)),
            Ok(answer) if answer.status() == StatusCode::NOT_FOUND && session.has_session_id => {
                tracing::debug!(upstream = %self.upstream, "session expired: the call goes through a new one");
                self.tap.forget(&session);
                Sent::Declined
            }
            Ok(answer) => Sent::Answered(self.read_answer(answer, &id, &session).await),
        };
        cancel.armed = false;
        answer
    }

    /// The headers and parameters of a stateless call: the session's headers with `Mcp-Method`
    /// and `Mcp-Name`, and `_meta` saying who sends it. `None` for a tool name no header can
    /// carry: rmcp sends that one.
    fn stateless(
        &self,
        session: &Session,
        params: &mut CallToolRequestParams,
    ) -> Option<http::HeaderMap> {
        let mut headers = session.headers.clone();
        headers.insert("mcp-method", HeaderValue::from_static("tools/call"));
        headers.insert("mcp-name", HeaderValue::from_str(&params.name).ok()?);
        let meta = params.meta.get_or_insert_with(RequestMetaObject::new);
        for (key, value) in &self.stateless_meta {
            meta.insert(key.clone(), value.clone());
        }
        Some(headers)
    }

    async fn read_answer(
        &self,
        mut response: Answer<'_>,
        id: &RequestId,
        session: &Arc<Session>,
    ) -> Result<Reply, CallError> {
        let status = response.status();
        // Like rmcp: these are transport failures, whatever their body says.
        if matches!(
            status,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::TOO_MANY_REQUESTS
        ) {
            return Err(self.lost(&format!("HTTP {status}")));
        }
        match media_type(response.headers()).as_deref() {
            Some("application/json") => {
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await.map_err(|e| self.lost(&e))? {
                    if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                        return Err(self.lost(&"the answer is larger than 16 MiB"));
                    }
                    body.extend_from_slice(&chunk);
                }
                match self.on_message(&body, id, session) {
                    // A failure status carries an error, never a result.
                    Some(Ok(_)) if !status.is_success() => {
                        Err(self.lost(&format!("HTTP {status} with a result")))
                    }
                    Some(answer) => answer,
                    None => Err(self.lost(&format!("HTTP {status} without the call's answer"))),
                }
            }
            Some("text/event-stream") if status.is_success() => {
                self.read_events(response, id, session).await
            }
            _ => Err(self.lost(&format!("HTTP {status} without a JSON-RPC answer"))),
        }
    }

    /// Reads an SSE answer stream up to the call's answer. A stream that closes before it, after
    /// an event id, is resumed with `GET` and `Last-Event-ID` (up to [`MAX_RESUMES`] times).
    async fn read_events(
        &self,
        mut response: Answer<'_>,
        id: &RequestId,
        session: &Arc<Session>,
    ) -> Result<Reply, CallError> {
        let mut events = EventSplitter::new(MAX_ANSWER_BYTES);
        let mut resumes = 0;
        loop {
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
            let Some(last_id) = events.last_id().map(str::to_string) else {
                return Err(self.lost(&"the answer stream ended before the answer"));
            };
            resumes += 1;
            if resumes > MAX_RESUMES {
                return Err(self.lost(&"the answer stream kept ending before the answer"));
            }
            let delay = events
                .retry_ms()
                .map_or(Duration::ZERO, Duration::from_millis);
            tokio::time::sleep(delay.min(MAX_RESUME_DELAY)).await;
            response = Answer::Reqwest(self.resume(session, &last_id).await?);
            // A resumed stream is a new stream: its events start afresh, its last id carries on.
            events = EventSplitter::resuming(MAX_ANSWER_BYTES, last_id);
        }
    }

    /// `GET` of the stream after event `last_id`.
    async fn resume(
        &self,
        session: &Arc<Session>,
        last_id: &str,
    ) -> Result<reqwest::Response, CallError> {
        let mut headers = session.headers.clone();
        headers.remove(header::CONTENT_TYPE);
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        let last = HeaderValue::from_str(last_id).map_err(|e| self.lost(&e))?;
        headers.insert("last-event-id", last);
        let response = self
            .http
            .get(self.url.clone())
            .headers(headers)
            .send()
            .await
            .map_err(|e| self.lost(&e))?;
        match (response.status(), media_type(response.headers()).as_deref()) {
            (status, Some("text/event-stream")) if status.is_success() => Ok(response),
            (status, _) => Err(self.lost(&format!("resuming the answer stream: HTTP {status}"))),
        }
    }

    /// Handles one message of the answer; returns the call's answer when this is it.
    fn on_message(
        &self,
        data: &[u8],
        id: &RequestId,
        session: &Arc<Session>,
    ) -> Option<Result<Reply, CallError>> {
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
        match (message.method, message.id, message.result, message.error) {
            (Some(method), Some(request), _, _) if relay::ASKS.contains(&method.as_str()) => {
                self.relay_ask(session, request, method, message.params);
                None
            }
            (Some(method), Some(request), _, _) => {
                self.reply(session, request, &method);
                None
            }
            (Some(method), None, _, _) => {
                match method.as_str() {
                    "notifications/tools/list_changed" => self.tools_changed.notify_one(),
                    "notifications/progress" | "notifications/message" => {
                        self.relay_notification(&method, data);
                    }
                    _ => {}
                }
                None
            }
            (None, Some(answered), Some(result), _) if answered == *id => {
                Some(self.tool_result(&result))
            }
            (None, Some(answered), None, Some(error)) if answered == *id => {
                Some(Err(CallError::Protocol(error)))
            }
            // An error for no request in particular (a parse error, say) is this call's.
            (None, None, None, Some(error)) => Some(Err(CallError::Protocol(error))),
            _ => None,
        }
    }

    /// Progress and log messages on the call's own answer stream: progress for one of the
    /// gateway's tokens to its client; a log message to the client of this call (the calling
    /// task's relay), or the gateway's log when the call has none.
    #[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28; 2025 upstreams log
    fn relay_notification(&self, method: &str, data: &[u8]) {
        #[derive(Deserialize)]
        struct Params<P> {
            params: P,
        }
        if method == "notifications/progress" {
            if let Ok(Params { params }) = serde_json::from_slice(data) {
                self.progress.deliver(params);
            }
            return;
        }
        let Ok(Params::<LoggingMessageNotificationParam> { params }) = serde_json::from_slice(data)
        else {
            return;
        };
        match relay::current() {
            Some(call) => call.client.log(params),
            None => relay::log_unrelated(&self.upstream, &params),
        }
    }

    /// The tool result in `result`, read as rmcp's client reads it: a result with no content
    /// (`{}`, or only `_meta`) is an empty tool result. A 2026-07-28 upstream may instead ask
    /// for input (`mrtr`).
    fn tool_result(&self, result: &RawValue) -> Result<Reply, CallError> {
        if let Ok(result) = serde_json::from_str::<CallToolResult>(result.get()) {
            return Ok(Reply::Complete(result));
        }
        if let Some(required) = mrtr::InputRequired::read(result.get()) {
            return Ok(Reply::InputRequired(required));
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Contentless {
            #[serde(rename = "_meta")]
            meta: Option<MetaObject>,
        }
        match serde_json::from_str::<ServerResult>(result.get()) {
            Ok(ServerResult::CallToolResult(result)) => Ok(Reply::Complete(result)),
            _ => match serde_json::from_str::<Contentless>(result.get()) {
                Ok(Contentless { meta }) => {
                    let mut empty = CallToolResult::default();
                    empty.meta = meta;
                    Ok(Reply::Complete(empty))
                }
                Err(_) => Err(CallError::Malformed(self.upstream.clone())),
            },
        }
    }

    /// Answers a request the upstream makes while the call runs (in the background: the
    /// upstream may wait for it before it answers the call), within the bounds of [`Replies`]:
    /// beyond them the request is left unanswered, and counted in the log (its first, then
    /// every thousandth).
    fn reply(&self, session: &Arc<Session>, request: RequestId, method: &str) {
        let Ok(waiting) = self.replies.waiting.clone().try_acquire_owned() else {
            let unanswered = self.replies.unanswered.fetch_add(1, Ordering::Relaxed) + 1;
            if unanswered % 1000 == 1 {
                tracing::warn!(upstream = %self.upstream, unanswered, "the upstream sends more requests than the gateway answers: left unanswered");
            }
            return;
        };
        let post = self.notice(session, reply_to(request, method));
        let (upstream, replies) = (self.upstream.clone(), self.replies.clone());
        tokio::spawn(async move {
            let _waiting = waiting;
            let Ok(_posting) = replies.posting.acquire().await else {
                return;
            };
            if let Err(error) = post.send().await {
                tracing::warn!(%upstream, %error, "could not answer the upstream's request");
            }
        });
    }

    /// Relays a request the upstream makes of the client on the call's answer stream to the
    /// calling task's client (`relay::ask`: an error when the call has none, as on the direct
    /// path) and posts the answer back, in the background and within the bounds of
    /// [`Replies`] (the client's user may take a while: only the post holds a posting permit).
    fn relay_ask(
        &self,
        session: &Arc<Session>,
        request: RequestId,
        method: String,
        params: Option<Box<RawValue>>,
    ) {
        let Ok(waiting) = self.replies.waiting.clone().try_acquire_owned() else {
            let unanswered = self.replies.unanswered.fetch_add(1, Ordering::Relaxed) + 1;
            if unanswered % 1000 == 1 {
                tracing::warn!(upstream = %self.upstream, unanswered, "the upstream sends more requests than the gateway answers: left unanswered");
            }
            return;
        };
        let params = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .unwrap_or_else(|| json!({}));
        let call = relay::current();
        let (upstream, replies) = (self.upstream.clone(), self.replies.clone());
        let (http, url, headers) = (self.http.clone(), self.url.clone(), session.headers.clone());
        tokio::spawn(async move {
            let _waiting = waiting;
            let answer = match relay::ask(call, &method, params).await {
                Ok(result) => json!({"jsonrpc": "2.0", "id": request, "result": result}),
                Err(error) => json!({"jsonrpc": "2.0", "id": request, "error": error}),
            };
            let Ok(_posting) = replies.posting.acquire().await else {
                return;
            };
            let post = http
                .post(url)
                .headers(headers)
                .timeout(NOTICE_TIMEOUT)
                .body(answer.to_string());
            if let Err(error) = post.send().await {
                tracing::warn!(%upstream, %error, %method, "could not answer the upstream's request");
            }
        });
    }

    /// A POST of `message` on `session`, bounded by [`NOTICE_TIMEOUT`].
    fn notice(&self, session: &Session, message: Value) -> reqwest::RequestBuilder {
        let mut headers = session.headers.clone();
        // A stateless (2026-07-28) upstream reads what a message is from its `Mcp-Method`.
        if session.stateless
            && let Some(method) = message.get("method").and_then(Value::as_str)
            && let Ok(value) = HeaderValue::from_str(method)
        {
            headers.insert("mcp-method", value);
        }
        self.http
            .post(self.url.clone())
            .headers(headers)
            .timeout(NOTICE_TIMEOUT)
            .body(message.to_string())
    }

    /// The transport failed: log why, answer plainly (as rmcp's path does).
    fn lost(&self, why: &dyn std::fmt::Display) -> CallError {
        tracing::warn!(upstream = %self.upstream, error = %why, "call failed: connection lost");
        CallError::ConnectionLost(self.upstream.clone())
    }
}

/// The answer to a call's POST, from the forwarder's own connection or from reqwest.
enum Answer<'a> {
    Own(h1::Answer<'a>),
    Reqwest(reqwest::Response),
}

impl Answer<'_> {
    fn status(&self) -> StatusCode {
        match self {
            Answer::Own(answer) => answer.status,
            Answer::Reqwest(response) => response.status(),
        }
    }

    fn headers(&self) -> &http::HeaderMap {
        match self {
            Answer::Own(answer) => &answer.headers,
            Answer::Reqwest(response) => response.headers(),
        }
    }

    /// The next piece of the body, `None` at its end.
    async fn chunk(&mut self) -> Result<Option<Chunk<'_>>, String> {
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
enum Chunk<'a> {
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
fn media_type(headers: &http::HeaderMap) -> Option<String> {
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

/// The gateway's answer to a request from the upstream that is not relayed to a client
/// (those are `relay_ask`'s): `ping` answered, anything else a JSON-RPC error.
fn reply_to(request: RequestId, method: &str) -> Value {
    let (key, value) = match method {
        "ping" => ("result", json!({})),
        _ => (
            "error",
            json!({ "code": -32601, "message": format!("Method not found: {method}") }),
        ),
    };
    json!({ "jsonrpc": "2.0", "id": request, key: value })
}

#[cfg(test)]
mod tests;
