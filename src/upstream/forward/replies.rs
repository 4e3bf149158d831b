//! The upstream's own requests on a call's answer stream (legacy upstreams: a 2026-07-28 one
//! asks with `InputRequiredResult`, `mrtr`): `ping` answered, `roots/list`,
//! `elicitation/create` and `sampling/createMessage` relayed to the calling client, anything
//! else refused; the answers posted back in the background, within bounds per upstream.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::RequestId;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::call_relay::{self, CallRelay};
use super::{Forwarder, NOTICE_TIMEOUT, Session};

/// Answers to the upstream's requests being posted at once, per upstream: each may hold a
/// connection, and an upstream sending 20,000 pings must not get 20,000 sockets.
const MAX_REPLIES_POSTING: usize = 16;
/// Answers waiting for their turn, per upstream; requests beyond these are not answered (and
/// counted in the log): an upstream that floods gets no answer to the flood.
const MAX_REPLIES_WAITING: usize = 256;

/// The answers to an upstream's requests under way, bounded.
pub(super) struct Replies {
    /// A permit per answer waiting or posting ([`MAX_REPLIES_WAITING`]).
    waiting: Arc<tokio::sync::Semaphore>,
    /// A permit per answer posting ([`MAX_REPLIES_POSTING`]).
    posting: tokio::sync::Semaphore,
    /// Requests left unanswered because too many answers were under way.
    unanswered: AtomicU64,
}

impl Replies {
    pub(super) fn new() -> Replies {
        Replies {
            waiting: Arc::new(tokio::sync::Semaphore::new(MAX_REPLIES_WAITING)),
            posting: tokio::sync::Semaphore::new(MAX_REPLIES_POSTING),
            unanswered: AtomicU64::new(0),
        }
    }
}

impl Forwarder {
    /// Answers a request the upstream makes while the call runs (in the background: the
    /// upstream may wait for it before it answers the call), within the bounds of [`Replies`]:
    /// beyond them the request is left unanswered, and counted in the log (its first, then
    /// every thousandth).
    pub(super) fn reply(&self, session: &Arc<Session>, request: RequestId, method: &str) {
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
    /// calling task's client (`call_relay::ask`: an error when the call has none, as on the direct
    /// path) and posts the answer back, in the background and within the bounds of
    /// [`Replies`] (the client's user may take a while: only the post holds a posting permit).
    pub(super) fn relay_ask(
        &self,
        session: &Arc<Session>,
        request: RequestId,
        method: String,
        params: Option<Box<RawValue>>,
        relay: Option<&Arc<CallRelay>>,
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
        let call = relay.cloned();
        let (upstream, replies) = (self.upstream.clone(), self.replies.clone());
        let (http, url, headers) = (self.http.clone(), self.url.clone(), session.headers.clone());
        tokio::spawn(async move {
            let _waiting = waiting;
            let answer = match call_relay::ask(call, &method, params).await {
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
}

/// The gateway's answer to a request from the upstream that is not relayed to a client
/// (those are `relay_ask`'s): `ping` answered, anything else a JSON-RPC error.
pub(super) fn reply_to(request: RequestId, method: &str) -> Value {
    let (key, value) = match method {
        "ping" => ("result", json!({})),
        _ => (
            "error",
            json!({ "code": -32601, "message": format!("Method not found: {method}") }),
        ),
    };
    json!({ "jsonrpc": "2.0", "id": request, key: value })
}
