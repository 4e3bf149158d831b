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
//! Log messages may also come a little after the call's answer: an HTTP upstream's standalone
//! stream is another connection than the call's, so a message sent just before the answer can
//! arrive just after it. A call therefore stays the owner of such messages for [`LINGER`] after
//! it ends, as long as it was the last call to start (else they are nobody's). And a call that
//! has been hearing such messages does not end at once when its answer comes: it waits until the
//! standalone stream has been quiet for [`SETTLE_QUIET`] (at most [`SETTLE_MAX`],
//! [`Entered::settle`]), so that a log sent just before the answer reaches the client before the
//! answer ends the call's stream. A call that heard none ends at once.
//!
//! Every attempt counts itself in flight ([`InFlight::enter`]: two atomic operations, and a map
//! entry only for calls that have a relay).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::RequestId;

use super::call_relay::CallRelay;

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
    /// Attempts started so far, relayed or not: a call that ended is the owner of late log
    /// messages only while no other attempt has started since it did.
    started: AtomicU64,
    /// Relayed attempts that ended since the map was last pruned.
    ended: AtomicUsize,
}

/// Ended entries from which they are pruned.
const PRUNE_FROM: usize = 32;

/// How long after its end a call still owns log messages that say not whose they are.
pub const LINGER: Duration = Duration::from_millis(250);

/// How long after the last log it heard from no stream of its own (and after its answer) a call
/// waits before it ends.
pub const SETTLE_QUIET: Duration = Duration::from_millis(20);

/// The longest a call waits for its upstream's stray logs to stop.
pub const SETTLE_MAX: Duration = Duration::from_millis(100);

/// How long a request that names one of rmcp's outbound requests waits for that request's id
/// to be noted: rmcp sends the request before it hands back the id, and a quick upstream can
/// ask before then.
const SENT_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

struct Relayed {
    relay: Arc<CallRelay>,
    /// The id of the request rmcp sent for it, once known.
    request: Option<RequestId>,
    /// The value of `started` once this attempt had started.
    started: u64,
    /// When it ended (it lingers, see [`LINGER`]).
    ended: Option<Instant>,
    /// When it was last given a log message that said not whose it was.
    heard: Option<Instant>,
}

/// One attempt in flight; dropping it ends it.
pub struct Entered<'a> {
    in_flight: &'a InFlight,
    slot: Option<u64>,
}

impl InFlight {
    /// Whether any attempt is in flight.
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Counts an attempt in flight until the returned guard is dropped.
    pub fn enter(&self, relay: Option<&Arc<CallRelay>>) -> Entered<'_> {
        self.count.fetch_add(1, Ordering::AcqRel);
        let started = self.started.fetch_add(1, Ordering::AcqRel) + 1;
        let slot = relay.map(|relay| {
            let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
            let mut relayed = self.lock();
            // Ended entries go once a few have ended (some may outlive `LINGER`: they are
            // ignored then), so that a call does not walk the map each time.
            if self.ended.load(Ordering::Relaxed) >= PRUNE_FROM {
                self.ended.store(0, Ordering::Relaxed);
                relayed.retain(|_, r| r.ended.is_none_or(|at| at.elapsed() < LINGER));
            }
            relayed.insert(
                slot,
                Relayed {
                    relay: relay.clone(),
                    request: None,
                    started,
                    ended: None,
                    heard: None,
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

    /// The relay of the call rmcp sent as request `id`, while it is in flight.
    pub fn by_request(&self, id: &RequestId) -> Option<Arc<CallRelay>> {
        self.lock()
            .values()
            .find(|r| r.ended.is_none() && r.request.as_ref() == Some(id))
            .map(|r| r.relay.clone())
    }

    /// The relay of the only call in flight, if there is exactly one and it has a relay: whom a
    /// request that says not whose it is belongs to.
    pub fn only_one(&self) -> Option<Arc<CallRelay>> {
        if self.count.load(Ordering::Acquire) != 1 {
            return None;
        }
        let relayed = self.lock();
        let mut live = relayed.values().filter(|r| r.ended.is_none());
        match (live.next(), live.next()) {
            (Some(only), None) => Some(only.relay.clone()),
            _ => None,
        }
    }

    /// Whom a log message that says not whose it is belongs to: the only call in flight, or,
    /// when none is, the last call to end if it ended within [`LINGER`] and was the last to
    /// start.
    pub fn owner_of_log(&self) -> Option<Arc<CallRelay>> {
        let in_flight = self.count.load(Ordering::Acquire);
        if in_flight > 1 {
            return None;
        }
        let started = self.started.load(Ordering::Acquire);
        let mut relayed = self.lock();
        let mut candidates = relayed.values_mut().filter(|r| match in_flight {
            1 => r.ended.is_none(),
            _ => r.started == started && r.ended.is_some_and(|at| at.elapsed() < LINGER),
        });
        let owner = match (candidates.next(), candidates.next()) {
            (Some(only), None) => only,
            _ => return None,
        };
        owner.heard = Some(Instant::now());
        Some(owner.relay.clone())
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

impl Entered<'_> {
    /// Waits, once the answer has come, until the logs this call has been hearing from no stream
    /// of its own have stopped: [`SETTLE_QUIET`] without one, counted from the answer at the
    /// earliest, at most [`SETTLE_MAX`] in all. Returns at once for a call that heard none.
    pub async fn settle(&self) {
        let Some(slot) = self.slot else { return };
        let answered = Instant::now();
        let give_up = answered + SETTLE_MAX;
        loop {
            let heard = self.in_flight.lock().get(&slot).and_then(|r| r.heard);
            let Some(heard) = heard else { return };
            let quiet_at = heard.max(answered) + SETTLE_QUIET;
            let now = Instant::now();
            if now >= quiet_at || now >= give_up {
                return;
            }
            tokio::time::sleep(quiet_at.min(give_up) - now).await;
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot
            && let Some(relayed) = self.in_flight.lock().get_mut(&slot)
        {
            relayed.ended = Some(Instant::now());
            self.in_flight.ended.fetch_add(1, Ordering::Relaxed);
        }
        self.in_flight.count.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::call_relay::tests::silent_relay;

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

    /// Proves: a call that heard no stray log ends as soon as its answer comes (the first poll
    /// of `settle` is ready); one that did waits at least `SETTLE_QUIET`; and one whose upstream
    /// never stops logging still ends (bounded by `SETTLE_MAX`).
    #[tokio::test]
    async fn a_call_that_heard_stray_logs_waits_for_them_to_stop_within_a_bound() {
        use std::task::{Context, Poll, Waker};
        let in_flight = Arc::new(InFlight::default());
        let relay = silent_relay();
        let quiet = in_flight.enter(Some(&relay));
        {
            let mut settle = std::pin::pin!(quiet.settle());
            let polled = settle
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
            assert!(matches!(polled, Poll::Ready(())), "heard nothing: no wait");
        }
        drop(quiet);

        let heard = in_flight.enter(Some(&relay));
        assert!(in_flight.owner_of_log().is_some());
        let started = Instant::now();
        heard.settle().await;
        assert!(started.elapsed() >= SETTLE_QUIET, "{:?}", started.elapsed());
        drop(heard);

        let chatty = in_flight.enter(Some(&relay));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let logger = std::thread::spawn({
            let (in_flight, stop) = (in_flight.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    in_flight.owner_of_log();
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        });
        let settled = tokio::time::timeout(Duration::from_secs(5), chatty.settle()).await;
        stop.store(true, Ordering::Relaxed);
        let _ = logger.join();
        assert!(
            settled.is_ok(),
            "an upstream that never stops logging holds no call"
        );
    }
}
