//! Per-session resource subscriptions, over upstream connections all sessions share: which URIs
//! this session subscribed to, and the task that passes on to it only the upstream notifications
//! it may hear: `resources/updated` for a URI it subscribed to and may still read,
//! `resources/list_changed` if it may read some declared resource, `prompts/list_changed` if it
//! may get some declared prompt. The same for a 2026-07-28 client's `subscriptions/listen`
//! stream ([`listen`]), whose filter names the URIs.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::model::SubscriptionFilter;
use rmcp::service::{Peer, SubscriptionContext};
use tokio::sync::broadcast::error::RecvError;

use crate::contract::resources::UriMatch;
use crate::policy::Caller;
use crate::runtime::Version;
use crate::upstream::{ResourceEvent, resource_events};

/// The URIs one client session subscribed to.
#[derive(Debug, Default, Clone)]
pub struct Subscribed(Arc<Mutex<BTreeSet<String>>>);

impl Subscribed {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn add(&self, uri: &str) {
        self.lock().insert(uri.to_string());
    }

    pub fn remove(&self, uri: &str) {
        self.lock().remove(uri);
    }

    pub fn contains(&self, uri: &str) -> bool {
        self.lock().contains(uri)
    }
}

/// Whether `caller` may hear of `event` in a session that subscribed to `subscribed`.
pub fn may_hear(
    gateway: &Version,
    caller: &Caller,
    subscribed: &Subscribed,
    event: &ResourceEvent,
) -> bool {
    match event {
        ResourceEvent::Updated(uri) => {
            subscribed.contains(uri) && gateway.readable(caller, uri).is_some()
        }
        ResourceEvent::ResourcesListChanged => gateway.contracts.resources.iter().any(|r| match &r
            .matcher
        {
            UriMatch::Template { template, .. } => caller.may_read(template),
            UriMatch::Exact(uri) | UriMatch::Glob(uri) => caller.may_read(uri),
        }),
        ResourceEvent::PromptsListChanged => gateway
            .contracts
            .prompts
            .keys()
            .any(|name| caller.may_get(name)),
    }
}

/// Passes on to `peer` the upstream notifications its session may hear, under the version it
/// was opened with, until the session ends. Nothing is spawned for a caller who may see no
/// resource and no prompt.
pub fn relay(
    gateway: Arc<Version>,
    caller: Arc<Caller>,
    subscribed: Subscribed,
    peer: Peer<RoleServer>,
) {
    if caller.resources.is_empty() && caller.prompts.is_empty() {
        return;
    }
    let mut events = resource_events();
    tokio::spawn(async move {
        // Checked every few seconds too, so the task ends with its session.
        let mut alive = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                event = events.recv() => {
                    let event = match event {
                        Ok(event) => event,
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => break,
                    };
                    if !may_hear(&gateway, &caller, &subscribed, &event) {
                        continue;
                    }
                    let sent = match event {
                        ResourceEvent::Updated(uri) => peer
                            .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                            .await
                            .is_ok(),
                        ResourceEvent::ResourcesListChanged => peer.notify_resource_list_changed().await.is_ok(),
                        ResourceEvent::PromptsListChanged => peer.notify_prompt_list_changed().await.is_ok(),
                    };
                    if !sent {
                        break;
                    }
                }
                _ = alive.tick() => {
                    if peer.is_transport_closed() {
                        break;
                    }
                }
            }
        }
    });
}

/// Resource URIs one `subscriptions/listen` stream may name; more are not subscribed.
pub const MAX_LISTENED_URIS: usize = 256;

/// What the gateway accepts of a `subscriptions/listen` filter before it knows the caller
/// (rmcp asks before the stream starts): every kind of change it publishes, and the first
/// [`MAX_LISTENED_URIS`] URIs whatever they are, so that accepting tells nothing of which
/// exist or are the caller's. [`listen`] then sends only what the caller may hear.
pub fn accepted_filter(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build();
    accepted.resource_subscriptions = requested
        .resource_subscriptions
        .as_ref()
        .map(|uris| uris.iter().take(MAX_LISTENED_URIS).cloned().collect());
    accepted
}

/// Serves one `subscriptions/listen` stream of `caller` until the client closes it: the
/// published tools' changes, and the upstream notifications it may hear ([`may_hear`]) for the
/// URIs its filter names that it may read, each subscribed upstream first.
pub async fn listen(
    gateway: Arc<Version>,
    caller: Arc<Caller>,
    context: SubscriptionContext,
) -> Result<(), rmcp::ErrorData> {
    let subscribed = Subscribed::default();
    for uri in context.accepted().resource_subscriptions.iter().flatten() {
        if gateway.readable(&caller, uri).is_none() {
            continue;
        }
        match gateway.subscription(&caller, uri, true).await {
            Ok(()) => subscribed.add(uri),
            Err(error) => tracing::warn!(
                caller = %caller.name,
                %uri,
                error = %error.message,
                "subscriptions/listen: the upstream refused the subscription; the stream will not hear of this resource"
            ),
        }
    }
    let mut tools = gateway.watch_tools();
    tools.mark_unchanged();
    let mut events = resource_events();
    let sink = context.sink();
    loop {
        let sent = tokio::select! {
            () = context.cancelled() => return Ok(()),
            changed = tools.changed() => match changed {
                Ok(()) => sink.notify_tool_list_changed().await,
                Err(_) => return Ok(()),
            },
            event = events.recv() => {
                let event = match event {
                    Ok(event) => event,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return Ok(()),
                };
                if !may_hear(&gateway, &caller, &subscribed, &event) {
                    continue;
                }
                match event {
                    ResourceEvent::Updated(uri) => sink.notify_resource_updated(uri).await,
                    ResourceEvent::ResourcesListChanged => sink.notify_resource_list_changed().await,
                    ResourceEvent::PromptsListChanged => sink.notify_prompt_list_changed().await,
                }
            }
        };
        // A kind the client did not ask for is not sent, and is no reason to stop.
        if let Err(
            rmcp::service::SubscriptionSendError::SubscriptionClosed
            | rmcp::service::SubscriptionSendError::Service(_),
        ) = sent
        {
            return Ok(());
        }
    }
}
