//! At-most-once for non-idempotent tools (SPEC §4.8 `dedupe`): an identical call (same caller,
//! tool and canonical arguments) inside the window is answered with the recorded result instead of
//! running again, and a duplicate that arrives while the first is still in flight waits for it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;
use tokio::sync::watch;

use crate::receipts::Outcome;

/// A call's answer as recorded for replays: the result and how the call ended.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub result: CallToolResult,
    pub outcome: Option<Outcome>,
}

/// What identifies "the same call".
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey {
    pub caller: String,
    pub tool: String,
    /// Digest of the canonical arguments.
    pub arguments: String,
}

enum Slot {
    InFlight(watch::Receiver<Option<Recorded>>),
    Done { recorded: Recorded, until: Instant },
}

/// How a deduplicated call was answered.
pub enum Deduped<T> {
    /// This call ran; `T` is what the runner returned.
    Ran(T),
    /// An identical call ran (or was running): this is its recorded answer, marked replayed.
    Replayed(Recorded),
}

/// The recorded calls of one gateway instance.
#[derive(Default)]
pub struct DedupeCache {
    slots: Mutex<HashMap<CallKey, Slot>>,
}

/// Above this many slots, expired ones are dropped on the next insert, keeping memory bounded.
const PRUNE_ABOVE: usize = 4096;

impl DedupeCache {
    /// Runs `run` unless an identical call is recorded or in flight. `run` returns its own value
    /// plus the result to record (`None`: nothing to record, e.g. the call never reached the
    /// upstream, so a repeat must run again).
    pub async fn run<T, F>(&self, key: CallKey, window: Duration, run: F) -> Deduped<T>
    where
        F: Future<Output = (T, Option<Recorded>)>,
    {
        let waiting = {
            let slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            match slots.get(&key) {
                Some(Slot::Done { recorded, until }) if *until > Instant::now() => {
                    return Deduped::Replayed(replayed(recorded.clone()));
                }
                Some(Slot::InFlight(rx)) => Some(rx.clone()),
                _ => None,
            }
        };
        if let Some(mut rx) = waiting {
            return match rx.wait_for(Option::is_some).await {
                Ok(recorded) => Deduped::Replayed(replayed(recorded.clone().unwrap_or_default())),
                // The first call was abandoned mid-flight: its effect is unknown, and running
                // again could make it happen twice.
                Err(_) => Deduped::Replayed(Recorded {
                    result: CallToolResult::error(vec![ContentBlock::text(
                        "an identical call was in flight and was abandoned; its effect is unknown, so it was not repeated",
                    )]),
                    outcome: Some(Outcome::Unknown),
                }),
            };
        }
        let (tx, rx) = watch::channel(None);
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            if slots.len() > PRUNE_ABOVE {
                let now = Instant::now();
                slots.retain(|_, slot| match slot {
                    Slot::Done { until, .. } => *until > now,
                    Slot::InFlight(_) => true,
                });
            }
            slots.insert(key.clone(), Slot::InFlight(rx));
        }
        let mut guard = InFlightGuard {
            cache: self,
            key: &key,
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

/// Removes the in-flight slot if the running call is dropped (client gone), so the key is not
/// stuck; waiters then learn the first call was abandoned.
struct InFlightGuard<'a> {
    cache: &'a DedupeCache,
    key: &'a CallKey,
    armed: bool,
}

impl Drop for InFlightGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut slots = self.cache.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.remove(self.key);
        }
    }
}

/// Marks a recorded result as replayed: `_meta: {"narrowgate/replayed": true}`.
fn replayed(mut recorded: Recorded) -> Recorded {
    let mut meta = recorded.result.meta.take().unwrap_or_default();
    meta.0
        .insert("narrowgate/replayed".into(), Value::Bool(true));
    recorded.result.meta = Some(meta);
    recorded
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn key(args: &str) -> CallKey {
        CallKey {
            caller: "c".into(),
            tool: "t".into(),
            arguments: args.into(),
        }
    }

    fn ok(text: &str) -> Recorded {
        Recorded {
            result: CallToolResult::success(vec![ContentBlock::text(text)]),
            outcome: Some(Outcome::Ok),
        }
    }

    #[tokio::test]
    async fn a_repeat_inside_the_window_is_replayed_not_run() {
        let cache = DedupeCache::default();
        let runs = AtomicU32::new(0);
        let run = || async {
            runs.fetch_add(1, Ordering::SeqCst);
            ((), Some(ok("done")))
        };
        assert!(matches!(
            cache.run(key("a"), Duration::from_secs(60), run()).await,
            Deduped::Ran(())
        ));
        match cache.run(key("a"), Duration::from_secs(60), run()).await {
            Deduped::Replayed(r) => {
                let meta = r.result.meta.expect("meta");
                assert_eq!(meta.0.get("narrowgate/replayed"), Some(&Value::Bool(true)));
            }
            Deduped::Ran(()) => panic!("ran twice"),
        }
        // Different arguments are a different call.
        assert!(matches!(
            cache.run(key("b"), Duration::from_secs(60), run()).await,
            Deduped::Ran(())
        ));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_duplicate_in_flight_waits_for_the_first() {
        let cache = Arc::new(DedupeCache::default());
        let runs = Arc::new(AtomicU32::new(0));
        let slow = {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
                ((), Some(ok("first")))
            }
        };
        let first = tokio::spawn({
            let cache = cache.clone();
            async move { cache.run(key("a"), Duration::from_secs(60), slow).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = cache
            .run(key("a"), Duration::from_secs(60), async {
                ((), Some(ok("second")))
            })
            .await;
        assert!(matches!(first.await.expect("joins"), Deduped::Ran(())));
        match second {
            Deduped::Replayed(r) => assert_eq!(r.result.content, ok("first").result.content),
            Deduped::Ran(()) => panic!("the duplicate ran"),
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn unrecorded_calls_and_expired_windows_run_again() {
        let cache = DedupeCache::default();
        assert!(matches!(
            cache
                .run(key("a"), Duration::from_secs(60), async { ((), None) })
                .await,
            Deduped::Ran(())
        ));
        assert!(matches!(
            cache
                .run(key("a"), Duration::from_secs(60), async { ((), None) })
                .await,
            Deduped::Ran(())
        ));
        let _ = cache
            .run(key("b"), Duration::from_millis(1), async {
                ((), Some(ok("x")))
            })
            .await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(matches!(
            cache
                .run(key("b"), Duration::from_millis(1), async {
                    ((), Some(ok("y")))
                })
                .await,
            Deduped::Ran(())
        ));
    }
}
