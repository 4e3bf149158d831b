//! At-most-once for non-idempotent tools (`dedupe`, docs/semantics.md): an identical call (same caller,
//! tool and canonical arguments) inside the window is answered with the recorded result instead of
//! running again, and a duplicate that arrives while the first is still in flight waits for it.
//!
//! [`DedupeCache`] is the one entry point whatever `state` says: with `state: memory` the records
//! live in this process (below); with `state: redis://…` they live in Redis
//! ([`redis`]); both speak the vocabulary of [`record`], so the promise holds across replicas.

mod memory;
mod record;
mod redis;

use std::future::Future;
use std::time::Duration;

use crate::config::{Config, StateBackend};
use memory::MemoryDedupe;
pub use record::{CallKey, Deduped, Recorded};
use redis::RedisDedupe;

/// The recorded calls of `dedupe` tools: in this process, or shared by replicas through Redis.
pub struct DedupeCache {
    backend: Backend,
    /// What the backend was built from: a reload keeps the records only if `state` is unchanged
    /// (carrying memory records into a Redis setup, or the reverse, would split them).
    state: StateBackend,
}

enum Backend {
    Memory(MemoryDedupe),
    Redis(RedisDedupe),
}

impl Default for DedupeCache {
    /// In-memory records (one instance; for tests too).
    fn default() -> Self {
        DedupeCache::new(&StateBackend::Memory)
    }
}

impl DedupeCache {
    /// The records `state` asks for.
    pub fn new(state: &StateBackend) -> DedupeCache {
        let backend = match state {
            StateBackend::Memory => Backend::Memory(MemoryDedupe::default()),
            StateBackend::Redis(url) => Backend::Redis(RedisDedupe::new(url)),
        };
        DedupeCache {
            backend,
            state: state.clone(),
        }
    }

    /// The records of `config`'s `state` (memory if it is invalid, which loading refuses).
    pub fn from_config(config: &Config) -> DedupeCache {
        DedupeCache::new(&config.state_backend().unwrap_or(StateBackend::Memory))
    }

    /// Whether these records are the ones `state` asks for (so a reload may keep them).
    pub fn serves(&self, state: &StateBackend) -> bool {
        self.state == *state
    }

    /// Runs `run` unless an identical call is recorded or in flight. `run` returns its own value
    /// plus the result to record (`None`: nothing to record, e.g. the call never reached the
    /// upstream, so a repeat must run again). `longest_run` bounds how long `run` can take (all
    /// attempts and backoffs): with shared records, a duplicate on another replica waits at most
    /// about that long before concluding the first call will never be recorded.
    pub async fn run<T, F>(
        &self,
        key: CallKey,
        window: Duration,
        longest_run: Duration,
        run: F,
    ) -> Deduped<T>
    where
        F: Future<Output = (T, Option<Recorded>)>,
    {
        match &self.backend {
            Backend::Memory(m) => m.run(key, window, run).await,
            Backend::Redis(r) => r.run(&key, window, longest_run, run).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipts::Outcome;
    use rmcp::model::{CallToolResult, ContentBlock};
    use serde_json::Value;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Unused by the memory records: a call here never waits on another process.
    const LONGEST: Duration = Duration::from_secs(1);

    fn key(args: &str) -> CallKey {
        CallKey {
            caller: "c".into(),
            tool: "t".into(),
            arguments: args.into(),
            idempotency_key: None,
        }
    }

    fn ok(text: &str) -> Recorded {
        Recorded {
            result: CallToolResult::success(vec![ContentBlock::text(text)]),
            outcome: Some(Outcome::Ok),
        }
    }

    /// Proves: an identical call inside the window is replayed (marked so) without running,
    /// and other arguments make another call.
    #[tokio::test]
    async fn a_repeat_inside_the_window_is_replayed_not_run() {
        let cache = DedupeCache::default();
        let runs = AtomicU32::new(0);
        let run = || async {
            runs.fetch_add(1, Ordering::SeqCst);
            ((), Some(ok("done")))
        };
        assert!(matches!(
            cache
                .run(key("a"), Duration::from_secs(60), LONGEST, run())
                .await,
            Deduped::Ran(())
        ));
        match cache
            .run(key("a"), Duration::from_secs(60), LONGEST, run())
            .await
        {
            Deduped::Replayed(r) => {
                let meta = r.result.meta.expect("meta");
                assert_eq!(meta.0.get("narrowgate/replayed"), Some(&Value::Bool(true)));
            }
            _ => panic!("ran twice"),
        }
        // Different arguments are a different call.
        assert!(matches!(
            cache
                .run(key("b"), Duration::from_secs(60), LONGEST, run())
                .await,
            Deduped::Ran(())
        ));
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    /// Proves: a duplicate arriving while the first call runs waits and gets its answer.
    #[tokio::test]
    async fn a_duplicate_in_flight_waits_for_the_first() {
        let cache = Arc::new(DedupeCache::default());
        let runs = Arc::new(AtomicU32::new(0));
        let started = Arc::new(tokio::sync::Notify::new());
        let slow = {
            let (runs, started) = (runs.clone(), started.clone());
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                started.notify_one();
                // A slow call (the behaviour under test), not a wait for anything.
                tokio::time::sleep(Duration::from_millis(200)).await;
                ((), Some(ok("first")))
            }
        };
        let first = tokio::spawn({
            let cache = cache.clone();
            async move {
                cache
                    .run(key("a"), Duration::from_secs(60), LONGEST, slow)
                    .await
            }
        });
        started.notified().await; // the first call is running
        let second = cache
            .run(key("a"), Duration::from_secs(60), LONGEST, async {
                ((), Some(ok("second")))
            })
            .await;
        assert!(matches!(first.await.expect("joins"), Deduped::Ran(())));
        match second {
            Deduped::Replayed(r) => assert_eq!(r.result.content, ok("first").result.content),
            _ => panic!("the duplicate ran"),
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    /// Proves: a call that recorded nothing, or whose window has passed, runs again.
    #[tokio::test]
    async fn unrecorded_calls_and_expired_windows_run_again() {
        let cache = DedupeCache::default();
        assert!(matches!(
            cache
                .run(key("a"), Duration::from_secs(60), LONGEST, async {
                    ((), None)
                })
                .await,
            Deduped::Ran(())
        ));
        assert!(matches!(
            cache
                .run(key("a"), Duration::from_secs(60), LONGEST, async {
                    ((), None)
                })
                .await,
            Deduped::Ran(())
        ));
        let _ = cache
            .run(key("b"), Duration::from_millis(1), LONGEST, async {
                ((), Some(ok("x")))
            })
            .await;
        // The 1 ms window must run out: that time passing is the behaviour under test.
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(matches!(
            cache
                .run(key("b"), Duration::from_millis(1), LONGEST, async {
                    ((), Some(ok("y")))
                })
                .await,
            Deduped::Ran(())
        ));
    }

    /// Proves: identical calls started together on several threads run once (looking and
    /// claiming the key are one step), and a duplicate waiting on a call that recorded nothing
    /// (it never reached the upstream) runs itself, as with Redis, rather than answer "unknown".
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn identical_calls_started_together_run_once() {
        let cache = Arc::new(DedupeCache::default());
        let runs = Arc::new(AtomicU32::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..16 {
            let (cache, runs) = (cache.clone(), runs.clone());
            tasks.spawn(async move {
                cache
                    .run(key("same"), Duration::from_secs(60), LONGEST, async {
                        runs.fetch_add(1, Ordering::SeqCst);
                        // A call that takes a while (so the others find it in flight).
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        ((), Some(ok("once")))
                    })
                    .await
            });
        }
        let answers = tasks.join_all().await;
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the call ran once");
        let replays = answers
            .iter()
            .filter(|a| matches!(a, Deduped::Replayed(_)))
            .count();
        assert_eq!(replays, 15, "every other call replayed its answer");

        let started = Arc::new(tokio::sync::Notify::new());
        let first = tokio::spawn({
            let (cache, started) = (cache.clone(), started.clone());
            async move {
                cache
                    .run(key("unsent"), Duration::from_secs(60), LONGEST, async {
                        started.notify_one();
                        // A call that takes a while, then records nothing.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        ((), None)
                    })
                    .await
            }
        });
        started.notified().await; // the first call is running
        let second = cache
            .run(key("unsent"), Duration::from_secs(60), LONGEST, async {
                ((), Some(ok("second")))
            })
            .await;
        assert!(matches!(first.await.expect("joins"), Deduped::Ran(())));
        assert!(
            matches!(second, Deduped::Ran(())),
            "the waiter ran itself once the first recorded nothing"
        );
    }

    /// Proves: a duplicate of a call dropped mid-flight is not run and not replayed: it answers
    /// that the effect is unknown (outcome `unknown`).
    #[tokio::test]
    async fn a_duplicate_of_an_abandoned_call_is_not_run() {
        let cache = Arc::new(DedupeCache::default());
        let started = Arc::new(tokio::sync::Notify::new());
        let first = tokio::spawn({
            let (cache, started) = (cache.clone(), started.clone());
            async move {
                cache
                    .run(key("a"), Duration::from_secs(60), LONGEST, async {
                        started.notify_one();
                        // A call that would run on (it is aborted first).
                        tokio::time::sleep(Duration::from_secs(10)).await;
                        ((), Some(ok("first")))
                    })
                    .await
            }
        });
        started.notified().await; // the first call is running
        let mut second = std::pin::pin!(cache.run(
            key("a"),
            Duration::from_secs(60),
            LONGEST,
            async { ((), Some(ok("second"))) }
        ));
        // Polled once, the duplicate is waiting on the first (nothing else could make it wait).
        let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(second.as_mut().poll(cx)));
        assert!(polled.await.is_pending(), "the duplicate did not wait");
        first.abort();
        match second.await {
            Deduped::NotRun(r) => assert_eq!(r.outcome, Some(Outcome::Unknown)),
            _ => panic!("the duplicate of an abandoned call ran or was replayed"),
        }
        // A repeat after the abandonment, inside the window, is not run either (as with Redis).
        let later = cache
            .run(key("a"), Duration::from_secs(60), LONGEST, async {
                ((), Some(ok("later")))
            })
            .await;
        match later {
            Deduped::NotRun(r) => assert_eq!(r.outcome, Some(Outcome::Unknown)),
            _ => panic!("a repeat of an abandoned call ran inside its window"),
        }
        // After the window, the key is free again.
        let after = cache.run(key("b"), Duration::from_millis(30), LONGEST, async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            ((), Some(ok("b")))
        });
        let _ = tokio::time::timeout(Duration::from_millis(20), after).await;
        // The 30 ms window must run out: that time passing is the behaviour under test.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(matches!(
            cache
                .run(key("b"), Duration::from_secs(60), LONGEST, async {
                    ((), Some(ok("b again")))
                })
                .await,
            Deduped::Ran(())
        ));
    }
}
