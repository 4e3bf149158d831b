//! Which sessions subscribed to which resource URIs (`resources/subscribe`), process-wide, so the
//! `touch_resource` tool can send `notifications/resources/updated` to exactly those sessions:
//! the behaviour a gateway must relay per session without leaking it to the others.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::Peer;

/// One subscribed session: a key unique among live sessions, and the way to reach it.
type Subscriber = (usize, Peer<RoleServer>);

#[derive(Debug, Default)]
pub struct Subscriptions {
    by_uri: Mutex<HashMap<String, Vec<Subscriber>>>,
}

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Subscriber>>> {
        self.by_uri
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Subscribes session `key` to `uri` (again: no change).
    pub fn add(&self, uri: &str, key: usize, peer: &Peer<RoleServer>) {
        let mut by_uri = self.lock();
        let subscribers = by_uri.entry(uri.to_owned()).or_default();
        if !subscribers.iter().any(|(k, _)| *k == key) {
            subscribers.push((key, peer.clone()));
        }
    }

    /// Unsubscribes session `key` from `uri`; unknown pairs are no error.
    pub fn remove(&self, uri: &str, key: usize) {
        let mut by_uri = self.lock();
        if let Some(subscribers) = by_uri.get_mut(uri) {
            subscribers.retain(|(k, _)| *k != key);
            if subscribers.is_empty() {
                by_uri.remove(uri);
            }
        }
    }

    /// Forgets session `key` everywhere (its connection ended).
    pub fn forget(&self, key: usize) {
        self.lock().retain(|_, subscribers| {
            subscribers.retain(|(k, _)| *k != key);
            !subscribers.is_empty()
        });
    }

    /// Sends `notifications/resources/updated` for `uri` to every session subscribed to it;
    /// returns how many were reached. A session that cannot be reached any more is forgotten.
    pub async fn notify_updated(&self, uri: &str) -> usize {
        let subscribers = self.lock().get(uri).cloned().unwrap_or_default();
        let mut reached = 0;
        for (key, peer) in subscribers {
            let param = ResourceUpdatedNotificationParam::new(uri);
            match peer.notify_resource_updated(param).await {
                Ok(()) => reached += 1,
                Err(error) => {
                    tracing::debug!(%error, "subscriber gone; forgetting it");
                    self.forget(key);
                }
            }
        }
        reached
    }
}
