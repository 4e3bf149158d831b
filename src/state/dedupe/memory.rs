//! The `state: memory` dedupe backend: the records of one gateway instance.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::state::dedupe::record::{
    CallKey, Deduped, Recorded, effect_unknown, key_reused, no_room, replayed,
};

/// A slot's state; `arguments` is the digest of the call that holds it (compared when the
/// identity is an idempotency key).
enum Slot {
    InFlight {
        answer: watch::Receiver<Option<Recorded>>,
        arguments: String,
    },
    Done {
        recorded: Recorded,
        arguments: String,
        until: Instant,
    },
    /// The call was dropped mid-flight: until the window ends, repeats answer that its effect is
    /// unknown (as with shared records in Redis) rather than run it a second time.
    Abandoned { until: Instant },
}

/// The recorded calls of one gateway instance.
pub struct MemoryDedupe {
    slots: Mutex<HashMap<Identity, Slot>>,
    /// [`MAX_SLOTS`], smaller in tests.
    max_slots: usize,
}

impl Default for MemoryDedupe {
    fn default() -> Self {
        MemoryDedupe {
            slots: Mutex::default(),
            max_slots: MAX_SLOTS,
        }
    }
}

/// What a slot is found by: the arguments' digest, or the idempotency key instead.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Identity {
    caller: String,
    tool: String,
    arguments: Option<String>,
    idempotency_key: Option<String>,
}

impl Identity {
    fn of(key: &CallKey) -> Identity {
        Identity {
            caller: key.caller.clone(),
            tool: key.tool.clone(),
            arguments: key.idempotency_key.is_none().then(|| key.arguments.clone()),
            idempotency_key: key.idempotency_key.clone(),
        }
    }
}

/// Above this many slots, expired ones are dropped on the next insert.
const PRUNE_ABOVE: usize = 4096;
/// At most this many slots are held, expired ones dropped first: each holds an answer (up to
/// `max_result_bytes`) for its window (24 h for an idempotency key), so without a bound a client
/// sending new keys fast enough could fill the gateway's memory. A call that would need a slot
/// beyond it is refused before it runs (never run without its record: that would break the
/// at-most-once promise). With `state: redis://…` Redis holds them, under its own `maxmemory`.
const MAX_SLOTS: usize = 100_000;

impl MemoryDedupe {
    /// [`DedupeCache::run`] within this process.
    pub async fn run<T, F>(&self, call: CallKey, window: Duration, run: F) -> Deduped<T>
    where
        F: Future<Output = (T, Option<Recorded>)>,
    {
        let key = Identity::of(&call);
        // Claim the key, or wait for the identical call in flight and look again when it ends:
        // it recorded an answer (replayed), was abandoned (effect unknown), or recorded nothing
        // because it never reached the upstream (then this call claims the key and runs).
        // Looking and claiming happen under one lock, so two identical calls never both run.
        let tx = loop {
            let mut in_flight = {
                let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
                match slots.get(&key) {
                    Some(Slot::Done {
                        recorded,
                        arguments,
                        until,
                    }) if *until > Instant::now() => {
                        if !call.same_request(Some(arguments)) {
                            return Deduped::NotRun(key_reused());
                        }
                        return Deduped::Replayed(replayed(recorded.clone()));
                    }
                    Some(Slot::Abandoned { until }) if *until > Instant::now() => {
                        return Deduped::NotRun(effect_unknown(
                            "an identical call was abandoned in flight",
                        ));
                    }
                    Some(Slot::InFlight { arguments, .. })
                        if !call.same_request(Some(arguments)) =>
                    {
                        return Deduped::NotRun(key_reused());
                    }
                    Some(Slot::InFlight { answer, .. }) => answer.clone(),
                    _ => {
                        if slots.len() > PRUNE_ABOVE || slots.len() >= self.max_slots {
                            let now = Instant::now();
                            slots.retain(|_, slot| match slot {
                                Slot::Done { until, .. } | Slot::Abandoned { until } => {
                                    *until > now
                                }
                                Slot::InFlight { .. } => true,
                            });
                        }
                        if slots.len() >= self.max_slots {
                            return Deduped::NotRun(no_room(slots.len()));
                        }
                        let (tx, rx) = watch::channel(None);
                        slots.insert(
                            key.clone(),
                            Slot::InFlight {
                                answer: rx,
                                arguments: call.arguments.clone(),
                            },
                        );
                        break tx;
                    }
                }
            };
            if let Ok(recorded) = in_flight.wait_for(Option::is_some).await {
                return Deduped::Replayed(replayed(recorded.clone().unwrap_or_default()));
            }
        };
        let mut guard = InFlightGuard {
            cache: self,
            key: &key,
            window,
            armed: true,
        };
        let (value, record) = run.await;
        guard.armed = false;
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        match record {
            Some(recorded) => {
                let _ = tx.send(Some(recorded.clone()));
                slots.insert(
                    key.clone(),
                    Slot::Done {
                        recorded,
                        arguments: call.arguments,
                        until: Instant::now() + window,
                    },
                );
            }
            None => {
                slots.remove(&key);
            }
        }
        Deduped::Ran(value)
    }
}

/// Marks the key abandoned if the running call is dropped (client gone): waiters learn at once
/// that the first call's effect is unknown, and so do repeats until the window ends.
struct InFlightGuard<'a> {
    cache: &'a MemoryDedupe,
    key: &'a Identity,
    window: Duration,
    armed: bool,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut slots = self.cache.slots.lock().unwrap_or_else(|p| p.into_inner());
            let until = Instant::now() + self.window;
            slots.insert(self.key.clone(), Slot::Abandoned { until });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipts::Outcome;

    fn keyed(key: &str) -> CallKey {
        CallKey {
            caller: "c".into(),
            tool: "t".into(),
            arguments: "{}".into(),
            idempotency_key: Some(key.into()),
        }
    }

    fn recorded() -> Recorded {
        Recorded {
            result: rmcp::model::CallToolResult::success(vec![]),
            outcome: Some(Outcome::Ok),
        }
    }

    /// Proves: the records are bounded: once they are full of unexpired calls, a call that needs
    /// a new record is refused before it runs (outcome `rate_limited`, saying why), while a repeat
    /// of a recorded call is still replayed; expired records make room again.
    #[tokio::test]
    async fn the_records_are_bounded_and_a_call_without_room_does_not_run() {
        let records = MemoryDedupe {
            slots: Mutex::default(),
            max_slots: 2,
        };
        let window = Duration::from_secs(60);
        for key in ["k1", "k2"] {
            let ran = records.run(keyed(key), window, async { ((), Some(recorded())) });
            assert!(matches!(ran.await, Deduped::Ran(())));
        }
        let mut ran = false;
        let third = records
            .run(keyed("k3"), window, async {
                ran = true;
                ((), Some(recorded()))
            })
            .await;
        match third {
            Deduped::NotRun(refused) => {
                assert_eq!(refused.outcome, Some(Outcome::RateLimited));
                assert!(format!("{:?}", refused.result).contains("recorded calls"));
            }
            _ => panic!("a third record beyond the bound"),
        }
        assert!(!ran, "refused before running");
        let repeat = records.run(keyed("k1"), window, async { ((), Some(recorded())) });
        assert!(matches!(repeat.await, Deduped::Replayed(_)));

        let short = MemoryDedupe {
            slots: Mutex::default(),
            max_slots: 1,
        };
        let first = short.run(keyed("a"), Duration::ZERO, async { ((), Some(recorded())) });
        assert!(matches!(first.await, Deduped::Ran(())));
        // PRUNE_ABOVE is far above this bound: expired records are dropped when full too.
        let second = short.run(keyed("b"), window, async { ((), Some(recorded())) });
        assert!(
            matches!(second.await, Deduped::Ran(())),
            "the expired record made room"
        );
    }
}
