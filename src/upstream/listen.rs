//! An upstream that negotiated 2026-07-28 has no session, hence no standalone stream: it tells
//! of changes to its tool, resource and prompt lists only on a `subscriptions/listen` stream.
//! [`start`] keeps one open per such connection (re-opened when it ends) and feeds what it
//! carries to the same places the legacy notifications go (`UpstreamClient`): the
//! `tools_changed` notify and `events`. Resource subscriptions have a stream of their own
//! (`watch.rs`), re-opened with the new set of URIs as it grows.

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ServerCapabilities, ServerNotification, SubscriptionFilter};
use rmcp::service::Peer;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::events::{self, ResourceEvent};

/// The wait before re-opening a stream that ended or could not be opened (doubling up to
/// [`MAX_RETRY`]): an upstream that refuses `subscriptions/listen` is not asked in a loop.
const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Whether the connection negotiated a protocol without `initialize` (2026-07-28 or later).
pub fn is_modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|info| !info.protocol_version.has_initialize())
}

/// The protocol version the connection negotiated, for `/readyz` and the log.
pub fn protocol_of(peer: &Peer<RoleClient>) -> Option<String> {
    peer.peer_info()
        .map(|info| info.protocol_version.as_str().to_string())
}

/// Keeps a `subscriptions/listen` stream of list changes open on `peer` while the returned
/// guard lives, if the connection is a 2026-07-28 one (a legacy connection gets these
/// notifications on its session, and needs nothing: `None`) and the upstream declared list
/// changes: one that declared none is not asked (it would refuse, or send nothing).
pub fn start(
    upstream: &str,
    peer: &Peer<RoleClient>,
    tools_changed: Arc<Notify>,
) -> Option<DropGuard> {
    if !is_modern(peer) {
        return None;
    }
    let Some(filter) = peer
        .peer_info()
        .and_then(|info| list_changes_declared(&info.capabilities))
    else {
        tracing::debug!(%upstream, "the upstream declares no list changes: no subscriptions/listen stream");
        return None;
    };
    Some(open(upstream, peer, filter, Some(tools_changed)).0)
}

/// The filter of the list changes `capabilities` declare (`None`: it declares none).
pub fn list_changes_declared(capabilities: &ServerCapabilities) -> Option<SubscriptionFilter> {
    let declared = |changes: Option<bool>| changes == Some(true);
    let tools = declared(capabilities.tools.as_ref().and_then(|t| t.list_changed));
    let resources = declared(capabilities.resources.as_ref().and_then(|r| r.list_changed));
    let prompts = declared(capabilities.prompts.as_ref().and_then(|p| p.list_changed));
    if !(tools || resources || prompts) {
        return None;
    }
    let mut filter = SubscriptionFilter::builder();
    if tools {
        filter = filter.tools_list_changed();
    }
    if resources {
        filter = filter.resources_list_changed();
    }
    if prompts {
        filter = filter.prompts_list_changed();
    }
    Some(filter.build())
}

/// Whether `capabilities` declare resource subscriptions (on 2026-07-28, a `subscriptions/listen`
/// filter naming URIs).
pub fn subscriptions_declared(capabilities: &ServerCapabilities) -> bool {
    capabilities
        .resources
        .as_ref()
        .and_then(|r| r.subscribe)
        .unwrap_or(false)
}

/// Keeps a stream with `filter` open on `peer` while the returned guard lives; the receiver
/// says how its first opening went (the upstream's acknowledgment, or why not). The stream of
/// list changes (`tools_changed`) re-reads the lists each time it is re-opened.
pub fn open(
    upstream: &str,
    peer: &Peer<RoleClient>,
    filter: SubscriptionFilter,
    tools_changed: Option<Arc<Notify>>,
) -> (DropGuard, oneshot::Receiver<Result<(), String>>) {
    let stop = CancellationToken::new();
    let (opened, first) = oneshot::channel();
    let task = listen(
        upstream.to_string(),
        peer.clone(),
        filter,
        tools_changed,
        opened,
        stop.clone(),
    );
    let stopped = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stopped.cancelled() => {}
            () = task => {}
        }
    });
    (stop.drop_guard(), first)
}

/// Opens the stream, passes on what it carries, and opens it again when it ends. Every time the
/// stream of list changes is re-opened the lists are re-read: a change while it was closed
/// would otherwise be missed.
async fn listen(
    upstream: String,
    peer: Peer<RoleClient>,
    filter: SubscriptionFilter,
    tools_changed: Option<Arc<Notify>>,
    opened: oneshot::Sender<Result<(), String>>,
    stop: CancellationToken,
) {
    let mut opened = Some(opened);
    let mut retry = FIRST_RETRY;
    let mut opened_before = false;
    // What fails again and again is said once at warn, then at debug: an upstream that keeps
    // refusing must not fill the log.
    let mut said = false;
    while !stop.is_cancelled() && !peer.is_transport_closed() {
        match peer.listen(filter.clone()).await {
            Err(error) => {
                if std::mem::replace(&mut said, true) {
                    tracing::debug!(%upstream, %error, "cannot open the subscriptions/listen stream (again)");
                } else {
                    tracing::warn!(%upstream, %error, "cannot open the subscriptions/listen stream: list changes and resource updates go unnoticed until it opens (retried quietly)");
                }
                if let Some(opened) = opened.take() {
                    let _ = opened.send(Err(error.to_string()));
                }
            }
            Ok(mut subscription) => {
                tracing::debug!(%upstream, "subscriptions/listen stream open");
                // Resource URIs asked for and not acknowledged get no updates: said once, as
                // the client's subscription holds all the same.
                let unacknowledged = filter.resource_subscriptions.as_ref().is_some_and(|asked| {
                    !asked.is_empty()
                        && subscription
                            .acknowledged()
                            .resource_subscriptions
                            .as_ref()
                            .is_none_or(|acked| acked.is_empty())
                });
                if unacknowledged && !opened_before {
                    tracing::info!(%upstream, "the upstream acknowledged a subscriptions/listen stream without its resource subscriptions: updates of those resources are not heard");
                }
                if let Some(opened) = opened.take() {
                    let _ = opened.send(Ok(()));
                }
                retry = FIRST_RETRY;
                if opened_before && let Some(tools_changed) = &tools_changed {
                    tools_changed.notify_one();
                    events::publish(ResourceEvent::ResourcesListChanged);
                    events::publish(ResourceEvent::PromptsListChanged);
                }
                opened_before = true;
                loop {
                    match subscription.next().await {
                        Ok(Some(notification)) => dispatch(&notification, tools_changed.as_deref()),
                        Ok(None) => break,
                        Err(error) => {
                            if std::mem::replace(&mut said, true) {
                                tracing::debug!(%upstream, %error, "the subscriptions/listen stream failed (again)");
                            } else {
                                tracing::warn!(%upstream, %error, "the subscriptions/listen stream failed (re-opened quietly)");
                            }
                            break;
                        }
                    }
                }
                tracing::debug!(%upstream, "subscriptions/listen stream ended");
            }
        }
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(MAX_RETRY);
    }
}

/// One notification of the stream, to where its legacy counterpart goes.
fn dispatch(notification: &ServerNotification, tools_changed: Option<&Notify>) {
    match notification {
        ServerNotification::ToolListChangedNotification(_) => {
            if let Some(tools_changed) = tools_changed {
                tools_changed.notify_one();
            }
        }
        ServerNotification::ResourceListChangedNotification(_) => {
            events::publish(ResourceEvent::ResourcesListChanged);
        }
        ServerNotification::PromptListChangedNotification(_) => {
            events::publish(ResourceEvent::PromptsListChanged);
        }
        ServerNotification::ResourceUpdatedNotification(n) => {
            events::publish(ResourceEvent::Updated(n.params.uri.clone()));
        }
        _ => {}
    }
}
