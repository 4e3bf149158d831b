//! Per-session resource subscriptions, over upstream connections all sessions share: which URIs
//! this session subscribed to, and the task that passes on to it only the upstream notifications
//! it may hear: `resources/updated` for a URI it subscribed to and may still read,
//! `resources/list_changed` if it may read some declared resource, `prompts/list_changed` if it
//! may get some declared prompt.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::Peer;
use tokio::sync::broadcast::error::RecvError;

use super::Gateway;
use crate::contract::resources::UriMatch;
use crate::policy::Caller;
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
    gateway: &Gateway,
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
    gateway: Arc<Gateway>,
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
