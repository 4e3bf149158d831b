//! Which client call an upstream's message belongs to, when the message itself does not say.
//!
//! A request or notification that arrives on a call's own answer stream (the forwarder reads
//! it in the calling task) is that call's. Otherwise the gateway has two clues:
//! - the stream an HTTP upstream's request came on: rmcp marks a request that arrived on the
//!   answer stream of one of its own outbound requests (`InboundStreamOrigin`), and the calls the
//!   gateway sent through rmcp are registered here by request id;
//! - nothing at all (a stdio upstream has one stream for everything; an HTTP upstream's
//!   standalone stream is tied to no request): then a message is taken to be about a call only
//!   when that call is the only one in flight on the upstream, whatever its path. With two or
//!   more, the gateway cannot tell whose it is, and it is nobody's.
//!
//! Every attempt counts itself in flight ([`InFlight::enter`]: one atomic add, and a map entry
//! only for calls that have a relay).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::RequestId;

use super::relay::CallRelay;

/// The calls in flight on one upstream.
#[derive(Default)]
pub struct InFlight {
    /// Every attempt in flight, relayed or not.
    count: AtomicUsize,
    /// The relayed ones, by slot.
    relayed: Mutex<HashMap<u64, Relayed>>,
    next_slot: AtomicU64,
    /// Told whenever a relayed call's request id becomes known.
    sent: tokio::sync::Notify,
}

/// How long a request that names one of rmcp's outbound requests waits for that request's id
/// to be noted: rmcp sends the request before it hands back the id, and a quick upstream can
/// ask before then.
const SENT_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

struct Relayed {
    relay: Arc<CallRelay>,
    /// The id of the request rmcp sent for it, once known.
    request: Option<RequestId>,
}

/// One attempt in flight; dropping it ends it.
pub struct Entered<'a> {
    in_flight: &'a InFlight,
    slot: Option<u64>,
}

impl InFlight {
    /// Counts an attempt in flight until the returned guard is dropped.
    pub fn enter(&self, relay: Option<&Arc<CallRelay>>) -> Entered<'_> {
        self.count.fetch_add(1, Ordering::AcqRel);
        let slot = relay.map(|relay| {
            let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
            self.lock().insert(
                slot,
                Relayed {
                    relay: relay.clone(),
                    request: None,
                },
            );
            slot
        });
        Entered {
            in_flight: self,
            slot,
        }
    }

    /// The relay of the call rmcp sent as request `id`, waiting up to [`SENT_WITHIN`] for its
    /// id to be noted.
    pub async fn of_request(&self, id: &RequestId) -> Option<Arc<CallRelay>> {
        let deadline = tokio::time::Instant::now() + SENT_WITHIN;
        loop {
            let sent = self.sent.notified();
            tokio::pin!(sent);
            sent.as_mut().enable();
            if let Some(relay) = self.by_request(id) {
                return Some(relay);
            }
            if tokio::time::timeout_at(deadline, sent).await.is_err() {
                return None;
            }
        }
    }

    /// The relay of the call rmcp sent as request `id`.
    pub fn by_request(&self, id: &RequestId) -> Option<Arc<CallRelay>> {
        self.lock()
            .values()
            .find(|r| r.request.as_ref() == Some(id))
            .map(|r| r.relay.clone())
    }

    /// The relay of the only call in flight, if there is exactly one and it has a relay.
    pub fn only_one(&self) -> Option<Arc<CallRelay>> {
        if self.count.load(Ordering::Acquire) != 1 {
            return None;
        }
        let relayed = self.lock();
        let mut all = relayed.values();
        match (all.next(), all.next()) {
            (Some(only), None) => Some(only.relay.clone()),
            _ => None,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Relayed>> {
        self.relayed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Entered<'_> {
    /// The call went out through rmcp as request `id`.
    pub fn sent_as(&self, id: RequestId) {
        if let Some(slot) = self.slot
            && let Some(relayed) = self.in_flight.lock().get_mut(&slot)
        {
            relayed.request = Some(id);
            self.in_flight.sent.notify_waiters();
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            self.in_flight.lock().remove(&slot);
        }
        self.in_flight.count.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::relay::tests::silent_relay;

    /// Proves: a message is given to a call only when that call is the only one in flight (a
    /// second call, even one without a relay, makes it nobody's), and a call rmcp sent is found
    /// by its request id for as long as it is in flight.
    #[test]
    fn only_the_only_call_in_flight_or_the_named_request() {
        let in_flight = Arc::new(InFlight::default());
        assert!(in_flight.only_one().is_none());
        let relay = silent_relay();
        let first = in_flight.enter(Some(&relay));
        assert!(
            in_flight
                .only_one()
                .is_some_and(|r| Arc::ptr_eq(&r, &relay))
        );
        let direct = in_flight.enter(None);
        assert!(in_flight.only_one().is_none(), "two in flight: nobody's");
        drop(direct);
        assert!(in_flight.only_one().is_some());
        first.sent_as(RequestId::Number(7));
        assert!(in_flight.by_request(&RequestId::Number(7)).is_some());
        assert!(in_flight.by_request(&RequestId::Number(8)).is_none());
        drop(first);
        assert!(in_flight.by_request(&RequestId::Number(7)).is_none());
        assert!(in_flight.only_one().is_none());
        let _alone = in_flight.enter(None);
        assert!(
            in_flight.only_one().is_none(),
            "a call without a relay takes nothing"
        );
    }
}
