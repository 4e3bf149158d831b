//! Resource subscriptions on an upstream, whichever protocol it speaks.
//!
//! A client session's `resources/subscribe` is relayed to the upstream once, on the connection
//! all sessions share (each session hears only of its own URIs: `mcp::subscriptions`). A
//! legacy upstream gets `resources/subscribe`. A 2026-07-28 upstream has no such method: it
//! sends `notifications/resources/updated` only on a `subscriptions/listen` stream whose filter
//! names the URIs. [`ResourceWatch`] keeps one such stream per connection for every URI
//! subscribed so far: a new URI opens a stream for the grown set, and the old stream is closed
//! once the upstream has acknowledged the new one (so no update goes unheard in between). A new
//! connection gets a stream for the set at once.

use std::collections::BTreeSet;
use std::sync::Mutex;

use rmcp::RoleClient;
use rmcp::model::{SubscribeRequestParams, SubscriptionFilter};
use rmcp::service::{Peer, ServiceError};
use tokio_util::sync::DropGuard;

use super::listen;

/// How long an upstream may take to acknowledge a stream of resource updates.
const ACKNOWLEDGED_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether the upstream behind `peer` declared resource subscriptions.
fn declares_subscriptions(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| listen::subscriptions_declared(&info.capabilities))
}

/// The resource URIs subscribed to on one upstream, and the stream that carries their updates
/// on a 2026-07-28 connection.
#[derive(Default)]
pub struct ResourceWatch {
    uris: Mutex<BTreeSet<String>>,
    /// Closes the current stream when replaced or dropped.
    stream: Mutex<Option<DropGuard>>,
    /// One subscription re-opens the stream at a time (two at once would each open one).
    opening: tokio::sync::Mutex<()>,
}

impl ResourceWatch {
    /// Subscribes to `uri` on `peer`: `resources/subscribe` for a legacy connection; for a
    /// 2026-07-28 one, a stream for every URI so far, returning once the upstream acknowledged
    /// it.
    pub async fn subscribe(
        &self,
        upstream: &str,
        peer: &Peer<RoleClient>,
        uri: &str,
    ) -> Result<(), ServiceError> {
        if !listen::is_modern(peer) {
            #[allow(deprecated)] // the legacy method is what pre-2026 upstreams serve
            return peer.subscribe(SubscribeRequestParams::new(uri)).await;
        }
        // An upstream that declared no resource subscriptions has no updates to send: the
        // subscription holds (the client hears of none, as it would directly) and the upstream
        // is not asked for a stream it would not acknowledge.
        if !declares_subscriptions(peer) {
            tracing::debug!(%upstream, uri, "the upstream declares no resource subscriptions: subscribed at the gateway only");
            return Ok(());
        }
        let _opening = self.opening.lock().await;
        let grown = self.lock_uris().insert(uri.to_string());
        if !grown && self.lock_stream().is_some() {
            return Ok(());
        }
        self.reopen(upstream, peer).await
    }

    /// A new connection: on a 2026-07-28 one, a stream for the URIs subscribed so far (in the
    /// background); on a legacy one nothing (its new session starts with none).
    pub fn connected(&self, upstream: &str, peer: &Peer<RoleClient>) {
        *self.lock_stream() = None;
        if !listen::is_modern(peer) {
            self.lock_uris().clear();
            return;
        }
        let Some(filter) = self.filter().filter(|_| declares_subscriptions(peer)) else {
            return;
        };
        let (guard, _first) = listen::open(upstream, peer, filter, None);
        *self.lock_stream() = Some(guard);
    }

    /// Opens a stream for the current set, waits for the upstream's acknowledgment, then
    /// closes the previous stream.
    async fn reopen(&self, upstream: &str, peer: &Peer<RoleClient>) -> Result<(), ServiceError> {
        let Some(filter) = self.filter() else {
            return Ok(());
        };
        let (guard, first) = listen::open(upstream, peer, filter, None);
        // An upstream that never acknowledges (a stream that is not one, say) must not hold
        // the client's `resources/subscribe` until its own timeout.
        let Ok(first) = tokio::time::timeout(ACKNOWLEDGED_WITHIN, first).await else {
            return Err(ServiceError::McpError(rmcp::ErrorData::internal_error(
                format!(
                    "the upstream did not acknowledge a subscriptions/listen stream within {}s",
                    ACKNOWLEDGED_WITHIN.as_secs()
                ),
                None,
            )));
        };
        match first {
            Ok(Ok(())) => {
                *self.lock_stream() = Some(guard);
                Ok(())
            }
            Ok(Err(error)) => Err(ServiceError::McpError(rmcp::ErrorData::internal_error(
                format!("the upstream did not open a subscriptions/listen stream: {error}"),
                None,
            ))),
            Err(_) => Err(ServiceError::TransportClosed),
        }
    }

    /// The filter for every URI subscribed so far (`None` when there is none).
    fn filter(&self) -> Option<SubscriptionFilter> {
        let uris = self.lock_uris();
        if uris.is_empty() {
            return None;
        }
        let mut filter = SubscriptionFilter::new();
        filter.resource_subscriptions = Some(uris.iter().cloned().collect());
        Some(filter)
    }

    fn lock_uris(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.uris.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_stream(&self) -> std::sync::MutexGuard<'_, Option<DropGuard>> {
        self.stream.lock().unwrap_or_else(|p| p.into_inner())
    }
}
