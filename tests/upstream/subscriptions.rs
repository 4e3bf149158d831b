//! Which sessions subscribed to which resource URIs (`resources/subscribe`), process-wide, so the
//! `touch_resource` tool can send `notifications/resources/updated` to exactly those sessions:
//! the behaviour a gateway must relay per session without leaking it to the others. A
//! 2026-07-28 client has no session: it names the URIs in a `subscriptions/listen` filter, and
//! hears of them on that stream ([`Subscriptions::watch`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::Peer;
use tokio::sync::broadcast;

/// One subscribed session: a key unique among live sessions, and the way to reach it.
type Subscriber = (usize, Peer<RoleServer>);

#[derive(Debug)]
pub struct Subscriptions {
    by_uri: Mutex<HashMap<String, Vec<Subscriber>>>,
    /// How many open `subscriptions/listen` streams name each URI.
    streams: Arc<Mutex<HashMap<String, usize>>>,
    /// Every touched URI, for those streams.
    updates: broadcast::Sender<String>,
}

impl Default for Subscriptions {
    fn default() -> Self {
        Subscriptions {
            by_uri: Mutex::default(),
            streams: Arc::default(),
            updates: broadcast::channel(64).0,
        }
    }
}

/// A stream's URIs, counted while it lives.
pub struct Watching {
    streams: Arc<Mutex<HashMap<String, usize>>>,
    uris: Vec<String>,
    pub updates: broadcast::Receiver<String>,
}

impl Drop for Watching {
    fn drop(&mut self) {
        let mut streams = lock(&self.streams);
        for uri in &self.uris {
            if let Some(count) = streams.get_mut(uri) {
                *count -= 1;
                if *count == 0 {
                    streams.remove(uri);
                }
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    /// A `subscriptions/listen` stream that names `uris`: it hears of them through the
    /// returned receiver, and counts as a subscriber while the guard lives.
    pub fn watch(&self, uris: &[String]) -> Watching {
        let mut streams = lock(&self.streams);
        for uri in uris {
            *streams.entry(uri.clone()).or_default() += 1;
        }
        Watching {
            streams: self.streams.clone(),
            uris: uris.to_vec(),
            updates: self.updates.subscribe(),
        }
    }

    /// Sends `notifications/resources/updated` for `uri` to every session subscribed to it, and
    /// to every stream that names it; returns how many were reached. A session that cannot be
    /// reached any more is forgotten.
    pub async fn notify_updated(&self, uri: &str) -> usize {
        let subscribers = self.lock().get(uri).cloned().unwrap_or_default();
        let mut reached = lock(&self.streams).get(uri).copied().unwrap_or(0);
        if reached > 0 {
            let _ = self.updates.send(uri.to_owned());
        }
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
