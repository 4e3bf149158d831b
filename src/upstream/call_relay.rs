//! What an upstream says about a call besides its answer, passed back to the client who made it.
//!
//! The gateway hands a client's call its [`CallRelay`] (in the call's `Reach`, down through the
//! pipeline to [`Upstream::call_with_retries`](super::Upstream::call_with_retries) and the
//! forwarder: a parameter, never an ambient value), and every attempt:
//! - gives the upstream a progress token of its own when the client asked for progress (the
//!   client's token means nothing on the upstream session all clients share), and turns the
//!   upstream's `notifications/progress` for it back into the client's (`Progress`);
//! - passes `notifications/message` that arrive on the call's own answer stream to the client
//!   (`ClientRelay::log`); others are the gateway's log only (see `log_unrelated`);
//! - gives the call up when the client cancels it (`CallRelay::cancelled`), which sends the
//!   upstream `notifications/cancelled`;
//! - passes the upstream's requests to the client (`sampling/createMessage`,
//!   `elicitation/create`, `roots/list`: [`ASKS`]) to the client whose call they belong to
//!   (`ClientRelay::ask`), and its answer back; a request that belongs to no call gets
//!   [`not_relayed`]. Which call a message belongs to when it does not arrive on the call's own
//!   stream is `inflight`'s to say.
//!
//! A call without a relay (the gateway's direct path, which has no stream to send them on) gets
//! none of this: its upstream's requests are refused, its logs are the gateway's.

// Logging is deprecated by SEP-2577 (2026-07-28); 2025 revisions, which clients and upstreams
// still speak, have it.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, NumberOrString, ProgressNotificationParam,
    ProgressToken,
};
use tokio_util::sync::CancellationToken;

/// The requests an upstream may make of the client whose call it serves.
pub const ASKS: [&str; 3] = ["sampling/createMessage", "elicitation/create", "roots/list"];

/// What a relayed request comes back with: the client's result, or the JSON-RPC error the
/// upstream gets.
pub type Asked = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<serde_json::Value, rmcp::ErrorData>> + Send>,
>;

/// The client's side of a relayed call, implemented by the gateway.
pub trait ClientRelay: Send + Sync {
    /// The upstream reported progress (`progress_token` is already the client's own).
    fn progress(&self, progress: ProgressNotificationParam);
    /// The upstream logged a message about this call.
    fn log(&self, message: LoggingMessageNotificationParam);
    /// The upstream asks the client `method` (one of [`ASKS`]) with `params`. By default
    /// nothing is relayed: the upstream gets [`not_relayed`].
    fn ask(&self, method: &str, params: serde_json::Value) -> Asked {
        let _ = params;
        let refused = not_relayed(method);
        Box::pin(async move { Err(refused) })
    }
}

/// Relays `method` to the client of `relay`, or refuses it when it belongs to no call.
pub async fn ask(
    relay: Option<Arc<CallRelay>>,
    method: &str,
    params: serde_json::Value,
) -> Result<serde_json::Value, rmcp::ErrorData> {
    match relay {
        Some(relay) => relay.client.ask(method, params).await,
        None => Err(not_relayed(method)),
    }
}

/// One client call's relay.
pub struct CallRelay {
    pub client: Arc<dyn ClientRelay>,
    /// The client's progress token, when it asked for progress.
    pub progress_token: Option<ProgressToken>,
    /// Cancelled when the client cancels the call.
    pub cancelled: CancellationToken,
}

/// Progress tokens the gateway gave upstream calls, to the relays of the calls they belong to,
/// for progress that does not arrive on the call's own stream (rmcp's client: a stdio upstream).
#[derive(Default)]
pub struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, Arc<CallRelay>>>,
}

/// The gateway's own progress tokens: unique across every upstream session of the process.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// A fresh token for one upstream attempt.
pub(super) fn fresh_token() -> ProgressToken {
    let n = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    ProgressToken(NumberOrString::String(
        format!("narrowgate-progress-{n}").into(),
    ))
}

impl ProgressRoutes {
    /// Routes `token` to `relay` until the returned guard is dropped.
    pub(super) fn route(
        self: &Arc<Self>,
        token: ProgressToken,
        relay: Arc<CallRelay>,
    ) -> RouteGuard {
        self.lock().insert(token.clone(), relay);
        RouteGuard {
            routes: self.clone(),
            token,
        }
    }

    /// Passes progress for one of the gateway's tokens on to its client, with the client's
    /// token; progress for a token the gateway did not give (or no longer routes) is dropped.
    pub fn deliver(&self, mut progress: ProgressNotificationParam) -> bool {
        let relay = self.lock().get(&progress.progress_token).cloned();
        match relay
            .as_ref()
            .and_then(|r| r.progress_token.clone().map(|t| (r, t)))
        {
            Some((relay, token)) => {
                progress.progress_token = token;
                relay.client.progress(progress);
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, Arc<CallRelay>>> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes a token's route when the attempt ends.
pub(super) struct RouteGuard {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.token);
    }
}

/// A log message from `upstream` related to no client call: the gateway's log, at its level.
pub fn log_unrelated(upstream: &str, message: &LoggingMessageNotificationParam) {
    let logger = message.logger.as_deref().unwrap_or("-");
    let data = &message.data;
    match message.level {
        LoggingLevel::Debug => tracing::debug!(%upstream, logger, %data, "upstream log"),
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(%upstream, logger, %data, "upstream log")
        }
        LoggingLevel::Warning => tracing::warn!(%upstream, logger, %data, "upstream log"),
        _ => tracing::error!(%upstream, logger, %data, "upstream log"),
    }
}

/// A level's severity, lowest first (MCP's order, from RFC 5424).
pub fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// Sends `notifications/cancelled` for a request through rmcp that is dropped before its answer
/// (the client cancelled the call, or it timed out).
pub(super) struct CancelUnlessAnswered {
    peer: rmcp::service::Peer<rmcp::RoleClient>,
    id: rmcp::model::RequestId,
    armed: bool,
}

impl CancelUnlessAnswered {
    pub(super) fn new(
        peer: rmcp::service::Peer<rmcp::RoleClient>,
        id: rmcp::model::RequestId,
    ) -> Self {
        CancelUnlessAnswered {
            peer,
            id,
            armed: true,
        }
    }

    pub(super) fn answered(&mut self) {
        self.armed = false;
    }
}

impl Drop for CancelUnlessAnswered {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (peer, id) = (self.peer.clone(), self.id.clone());
        runtime.spawn(async move {
            let cancelled = rmcp::model::CancelledNotificationParam::new(
                Some(id),
                Some("the gateway's client cancelled the call, or it timed out".into()),
            );
            let _ = peer.notify_cancelled(cancelled).await;
        });
    }
}

/// Asks a connected upstream that logs for every message (`logging/setLevel debug`): each
/// client session filters at its own level, so the upstream must send what the most verbose
/// one wants. An upstream that does not declare `logging` is not asked.
pub(super) async fn ask_for_every_log(
    upstream: &str,
    peer: &rmcp::service::Peer<rmcp::RoleClient>,
) {
    let logs = peer
        .peer_info()
        .is_some_and(|info| info.capabilities.logging.is_some());
    if !logs {
        return;
    }
    let level = rmcp::model::SetLevelRequestParams::new(LoggingLevel::Debug);
    let asked = tokio::time::timeout(std::time::Duration::from_secs(5), peer.set_level(level));
    if !matches!(asked.await, Ok(Ok(_))) {
        tracing::info!(%upstream, "the upstream did not accept logging/setLevel debug");
    }
}

/// The JSON-RPC error an upstream gets for a request to the client the gateway does not relay
/// because it belongs to no client call: never an answer the user did not give.
pub fn not_relayed(method: &str) -> rmcp::ErrorData {
    rmcp::ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!(
            "{method} is not relayed: no client that can answer it is behind this request (its \
             call came by a path with no stream to the client, or the request belongs to no \
             client call the gateway can tell)"
        ),
        None,
    )
}

/// An accepted form elicitation's `content` must satisfy the request's `requestedSchema`.
pub fn check_elicitation(
    params: &serde_json::Value,
    answer: &serde_json::Value,
) -> Result<(), rmcp::ErrorData> {
    if answer.get("action").and_then(serde_json::Value::as_str) != Some("accept") {
        return Ok(());
    }
    let Some(schema) = params.get("requestedSchema") else {
        // URL mode: nothing to check.
        return Ok(());
    };
    let validator = crate::contract::schema::compile(schema).map_err(|error| {
        rmcp::ErrorData::invalid_params(
            format!("elicitation/create with a requestedSchema that does not compile: {error}"),
            None,
        )
    })?;
    let content = answer
        .get("content")
        .cloned()
        .unwrap_or_else(|| serde_json::Value::Object(Default::default()));
    match crate::contract::schema::first_violation(&validator, &content) {
        None => Ok(()),
        Some(violation) => Err(rmcp::ErrorData::new(
            rmcp::model::ErrorCode::INVALID_PARAMS,
            format!(
                "the client's answer to elicitation/create is outside the requestedSchema: \
                 {violation}"
            ),
            None,
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    struct Silent;

    impl ClientRelay for Silent {
        fn progress(&self, _: ProgressNotificationParam) {}
        fn log(&self, _: LoggingMessageNotificationParam) {}
    }

    /// A relay that sends nothing and relays no request.
    pub(crate) fn silent_relay() -> Arc<CallRelay> {
        Arc::new(CallRelay {
            client: Arc::new(Silent),
            progress_token: None,
            cancelled: CancellationToken::new(),
        })
    }

    /// Proves: a request that belongs to no call, or to a client relay that relays nothing, is
    /// an error upstream (method not found), never a made-up answer.
    #[tokio::test]
    async fn a_request_of_no_call_is_refused() {
        for relay in [None, Some(silent_relay())] {
            let refused = ask(relay, "roots/list", serde_json::json!({}))
                .await
                .expect_err("refused");
            assert_eq!(refused.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
            assert!(refused.message.contains("roots/list is not relayed"));
        }
    }
}
