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
//! must not become a socket each: `replies`), passing `tools/list_changed` on, and sending
//! `notifications/cancelled` for a call given up on (a timeout; on a 2026-07-28 upstream,
//! closing the answer stream is the cancellation).
//!
//! rmcp keeps everything else: the handshake, `tools/list`, pings, the standalone stream, and
//! re-initialising an expired session. A call the upstream answers with 404 on its session is
//! handed back ([`Forwarded::Declined`]) and goes through rmcp, whose new session the next calls
//! then use. An upstream that negotiated 2026-07-28 or later has no session: each call goes
//! alone, saying what it is in the standard headers (`Mcp-Method`, `Mcp-Name`) and who sends it
//! in `_meta` (protocol version, client info and capabilities), as rmcp's client would send it
//! (`stateless`), and may answer that it needs input first (`mrtr`).

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, StatusCode, header};
#[allow(deprecated)] // logging: SEP-2577 deprecates it from 2026-07-28; 2025 upstreams log
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ErrorData,
    LoggingMessageNotificationParam, MetaObject, RequestId, ServerResult,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::CallError;
use super::call_relay::{self, CallRelay, ProgressRoutes};
use super::h1::{self, Http1Client};
use super::mrtr;
use super::sse::EventSplitter;
use super::tap::{Session, SessionTap, TappedClient};

mod answer;
mod replies;
mod stateless;

use answer::{Answer, media_type};
use replies::Replies;

/// The largest answer read, as rmcp's own limit for JSON bodies and SSE events.
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// How often an answer stream that closed before the answer is resumed.
const MAX_RESUMES: u32 = 3;
/// The longest wait before resuming, whatever the stream's `retry:` asks.
const MAX_RESUME_DELAY: Duration = Duration::from_secs(5);
/// How long the end of a stateless answer stream is waited for once the answer is read, to
/// keep its connection (it normally follows at once; a late one costs a new connection).
const STREAM_END_WITHIN: Duration = Duration::from_millis(2);
/// Bound on the small messages the forwarder sends on its own (answers, cancellations).
const NOTICE_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Bounds on the answers to the upstream's requests (see [`MAX_REPLIES_WAITING`]).
    replies: Arc<Replies>,
    /// Where the answer stream's `notifications/progress` go (`relay`).
    progress: Arc<ProgressRoutes>,
    /// What a stateless (2026-07-28) call carries in `_meta` about its sender.
    identity: stateless::Identity,
}

#[derive(Serialize)]
struct OutgoingCall<'a, P> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'static str,
    params: P,
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
            replies: Arc::new(Replies::new()),
            progress,
            identity: stateless::Identity::default(),
        }
    }

    /// The same forwarder, telling a stateless (2026-07-28) upstream in each call's `_meta`
    /// that `client` sends it, as rmcp's client says it in every request.
    pub fn identified_as(mut self, client: &ClientConfig) -> Forwarder {
        self.identity = stateless::Identity::of(client);
        self
    }

    /// Sends the call and reads its answer, or declines it when rmcp must send it. An upstream
    /// that answers with an `InputRequiredResult` (2026-07-28) gets the call again with the
    /// calling client's answers (`mrtr`).
    pub async fn call(
        &self,
        params: &mut CallToolRequestParams,
        relay: Option<&Arc<CallRelay>>,
    ) -> Forwarded {
        let mut round = 0;
        loop {
            let required = match self.call_once(params, relay).await {
                Sent::Answered(Ok(Reply::Complete(result))) => {
                    return Forwarded::Answered(Ok(result));
                }
                Sent::Answered(Ok(Reply::InputRequired(required))) => required,
                Sent::Answered(Err(error)) => return Forwarded::Answered(Err(error)),
                Sent::Declined => return Forwarded::Declined,
            };
            round += 1;
            // Boxed: rare, and its future (the client's answers) would sit in every call's.
            if let Err(failed) = Box::pin(mrtr::answer_round(
                &self.upstream,
                required,
                round,
                relay.cloned(),
                params,
            ))
            .await
            {
                return Forwarded::Answered(Ok(failed));
            }
        }
    }

    /// One round of the call: sends it and reads its answer.
    async fn call_once(
        &self,
        params: &CallToolRequestParams,
        relay: Option<&Arc<CallRelay>>,
    ) -> Sent {
        let Some(session) = self.tap.current() else {
            return Sent::Declined;
        };
        // A stateless call says what it is in its headers: a tool name no header can carry
        // as it is goes through rmcp.
        if session.stateless && !stateless::fits_a_header(&params.name) {
            return Sent::Declined;
        }
        let id = call_id();
        let body = if session.stateless {
            serde_json::to_vec(&OutgoingCall {
                jsonrpc: "2.0",
                id: &id,
                method: "tools/call",
                params: stateless::Params {
                    params,
                    identity: &self.identity,
                },
            })
        } else {
            serde_json::to_vec(&OutgoingCall {
                jsonrpc: "2.0",
                id: &id,
                method: "tools/call",
                params,
            })
        };
        let Ok(body) = body else {
            return Sent::Declined;
        };
        let what: &[(&str, &str)] = if session.stateless {
            &[("mcp-method", "tools/call"), ("mcp-name", &params.name)]
        } else {
            &[]
        };
        let mut cancel = CancelUnlessAnswered {
            armed: true,
            forwarder: self,
            session: &session,
            id: &id,
        };
        let sent = match &self.h1 {
            Some(h1) => h1
                .post(&session.headers, what, &body)
                .await
                .map(Answer::Own)
                .map_err(|e| self.lost(&e)),
            None => {
                let mut post = self
                    .http
                    .post(self.url.clone())
                    .headers(session.headers.clone());
                for (name, value) in what {
                    post = post.header(*name, *value);
                }
                post.body(body)
                    .send()
                    .await
                    .map(Answer::Reqwest)
                    .map_err(|e| self.lost(&e))
            }
        };
        let answer = match sent {
            Err(lost) => Sent::Answered(Err(lost)),
            Ok(answer) if answer.status() == StatusCode::NOT_FOUND && session.has_session_id => {
                tracing::debug!(upstream = %self.upstream, "session expired: the call goes through a new one");
                self.tap.forget(&session);
                Sent::Declined
            }
            Ok(answer) => Sent::Answered(self.read_answer(answer, &id, &session, relay).await),
        };
        cancel.armed = false;
        answer
    }

    async fn read_answer(
        &self,
        mut response: Answer<'_>,
        id: &RequestId,
        session: &Arc<Session>,
        relay: Option<&Arc<CallRelay>>,
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
                match self.on_message(&body, id, session, relay) {
                    // A failure status carries an error, never a result.
                    Some(Ok(_)) if !status.is_success() => {
                        Err(self.lost(&format!("HTTP {status} with a result")))
                    }
                    Some(answer) => answer,
                    None => Err(self.lost(&format!("HTTP {status} without the call's answer"))),
                }
            }
            Some("text/event-stream") if status.is_success() => {
                self.read_events(response, id, session, relay).await
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
        relay: Option<&Arc<CallRelay>>,
    ) -> Result<Reply, CallError> {
        let mut events = EventSplitter::new(MAX_ANSWER_BYTES);
        let mut resumes = 0;
        loop {
            let mut answer = None;
            while let Some(chunk) = response.chunk().await.map_err(|e| self.lost(&e))? {
                events
                    .feed(&chunk, |data| {
                        answer = self.on_message(data, id, session, relay);
                        answer.is_none()
                    })
                    .map_err(|_| self.lost(&"an event is larger than 16 MiB"))?;
                if let Some(answer) = answer {
                    // A stateless (2026-07-28) answer stream ends with the answer.
                    if session.stateless {
                        response.finish_within(STREAM_END_WITHIN).await;
                    }
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
        relay: Option<&Arc<CallRelay>>,
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
            (Some(method), Some(request), _, _) if call_relay::ASKS.contains(&method.as_str()) => {
                self.relay_ask(session, request, method, message.params, relay);
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
                        self.relay_notification(&method, data, relay);
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
            // An answer on this call's stream is this call's: one with another id answers no
            // request of ours (the gateway's ids cannot be guessed), and is refused, never
            // taken for a later call's.
            (None, Some(answered), _, _) => {
                tracing::warn!(upstream = %self.upstream, id = %answered, "refused an answer whose id is not the call's");
                Some(Err(CallError::Malformed(self.upstream.clone())))
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
    fn relay_notification(&self, method: &str, data: &[u8], relay: Option<&Arc<CallRelay>>) {
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
        match relay {
            Some(call) => call.client.log(params),
            None => call_relay::log_unrelated(&self.upstream, &params),
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

/// A new request id for a call: `narrowgate-` and 128 random bits from the thread's CSPRNG
/// (ChaCha, seeded by the OS). A counter would let an upstream that sees one call's id predict
/// the next and answer it ahead, on a kept connection, for another caller; these cannot be
/// guessed. (Strings, so they never clash with rmcp's numeric ids on a shared session.)
fn call_id() -> RequestId {
    const PREFIX: &[u8] = b"narrowgate-";
    let random: [u8; 16] = rand::random();
    let mut text = [0u8; PREFIX.len() + 32];
    text[..PREFIX.len()].copy_from_slice(PREFIX);
    // 32 hex digits fit exactly: the encoding cannot fail.
    let _ = hex::encode_to_slice(random, &mut text[PREFIX.len()..]);
    RequestId::String(String::from_utf8_lossy(&text).into_owned().into())
}

#[cfg(test)]
mod tests;
