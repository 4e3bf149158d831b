//! `dedupe` shared by replicas (docs/semantics.md, with `state: redis://…`): the record of a call lives
//! in Redis under `narrowgate:dedupe:<sha256(caller, tool, arguments digest)>`, so an identical
//! call through any replica is answered from it.
//!
//! The key goes through three states:
//! 1. **In flight.** The first call claims the key with `SET NX` (atomically, so of any number of
//!    replicas exactly one runs the call). Its marker lives `window + longest run + grace`: long
//!    enough that a replica which died mid-call leaves the key claimed for the whole window, so
//!    nobody runs the call a second time after a crash.
//! 2. **Recorded.** When the call ends, its answer replaces the marker for `window`; duplicates
//!    that were polling replay it. A call that never reached the upstream deletes its marker
//!    instead, so a repeat (or a waiting duplicate) may run: nothing happened yet.
//! 3. **Abandoned.** A call whose task is dropped mid-flight replaces its marker with this, so
//!    duplicates learn at once that its effect is unknown.
//!
//! A duplicate that finds a marker polls until the answer appears. It gives up, answering that the
//! effect is unknown and the call was not repeated, once the marker is overdue: its remaining TTL
//! (on Redis's clock, so replicas' clocks need not agree) has dropped to the window, meaning the
//! first call has had its whole longest run plus grace and never recorded anything.
//!
//! If Redis cannot be reached, dedupe tools are refused (fail closed), since running the call
//! could repeat one that another replica ran: the outcome is `upstream_error` (the call could
//! not be carried out because a service the gateway depends on failed; nothing was sent, so,
//! unlike `unknown`, retrying later is safe), with a log line at most every few seconds.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::receipts::Outcome;
use crate::state::RedisState;
use crate::state::dedupe::record::{
    CallKey, Deduped, Recorded, effect_unknown, key_reused, replayed,
};

/// How often a duplicate looks for the first call's answer: small next to a tool call, and one
/// cheap script call per waiting duplicate.
const POLL_EVERY: Duration = Duration::from_millis(50);
/// Time a call has beyond its longest run to record its answer (output validation, the Redis
/// write with its own timeout). Past it, a waiting duplicate concludes the call is lost.
const GRACE: Duration = Duration::from_secs(5);

/// Claims `KEYS[1]` for this call, or says what holds it, atomically (no key can vanish
/// between the two). ARGV[1]: this call's in-flight marker; ARGV[2]: its lifetime in ms.
/// Returns `{1, '', 0}` when claimed, else `{0, value, remaining ms}`.
const CLAIM_SCRIPT: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, '', 0} end
return {0, redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
";

/// Replaces this call's own marker, and nothing else: if the marker expired and another call
/// claimed the key, that call's state is left alone. ARGV[1]: the marker; ARGV[2]: the new value
/// ('' deletes the key); ARGV[3]: its lifetime in ms. Returns 1 if replaced.
const FINISH_SCRIPT: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
";

/// What a dedupe key holds, as JSON.
#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Entry {
    /// A call is running. `call` makes the marker unique to it (see [`FINISH_SCRIPT`]);
    /// `window_ms` lets duplicates with another configuration tell when it is overdue.
    /// `arguments`: the digest of the call's arguments, which a repeat of an idempotency key
    /// must match (absent in entries of older versions).
    InFlight {
        call: String,
        window_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<String>,
    },
    /// The answer to replay.
    Recorded {
        result: CallToolResult,
        /// As in receipts (`ok`, `tool_error`, …).
        outcome: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<String>,
    },
    /// The call was dropped mid-flight: its effect is unknown.
    Abandoned,
}

/// What claiming a key found.
enum Claim {
    /// This call holds the key: it runs.
    Ours,
    /// Another call does: its entry, and the key's remaining lifetime in ms (-1: none).
    Taken { value: String, ttl_ms: i64 },
}

/// The dedupe records of every replica pointed at one Redis.
pub struct RedisDedupe {
    /// Shared with the task that marks a dropped call abandoned.
    inner: Arc<Inner>,
}

struct Inner {
    state: RedisState,
    claim: redis::Script,
    finish: redis::Script,
}

impl RedisDedupe {
    pub fn new(url: &str) -> RedisDedupe {
        RedisDedupe {
            inner: Arc::new(Inner {
                state: RedisState::new(url, "every call of a dedupe tool will be refused"),
                claim: redis::Script::new(CLAIM_SCRIPT),
                finish: redis::Script::new(FINISH_SCRIPT),
            }),
        }
    }

    /// [`crate::state::dedupe::dedupe::DedupeCache::run`] across replicas.
    pub async fn run<T, F>(
        &self,
        key: &CallKey,
        window: Duration,
        longest_run: Duration,
        run: F,
    ) -> Deduped<T>
    where
        F: Future<Output = (T, Option<Recorded>)>,
    {
        let redis_key = redis_key(key);
        let window_ms = millis(window);
        let marker = encode(&Entry::InFlight {
            call: uuid::Uuid::now_v7().to_string(),
            window_ms,
            arguments: key.idempotency_key.as_ref().map(|_| key.arguments.clone()),
        });
        let lifetime_ms = millis(window.saturating_add(longest_run).saturating_add(GRACE));
        // `None` (a timeout too large for the clock): only the marker's own TTL ends the wait.
        let give_up_at = Instant::now().checked_add(longest_run.saturating_add(GRACE));
        let mut waited = false;
        loop {
            let claim = match self.inner.claim(&redis_key, &marker, lifetime_ms).await {
                Ok(claim) => claim,
                Err(why) => {
                    return Deduped::NotRun(self.unreachable(&key.tool, &why, waited).await);
                }
            };
            let (value, ttl_ms) = match claim {
                Claim::Ours => break,
                Claim::Taken { value, ttl_ms } => (value, ttl_ms),
            };
            match serde_json::from_str::<Entry>(&value) {
                Ok(Entry::Recorded { arguments, .. } | Entry::InFlight { arguments, .. })
                    if !key.same_request(arguments.as_deref()) =>
                {
                    return Deduped::NotRun(key_reused());
                }
                Ok(Entry::Recorded {
                    result, outcome, ..
                }) => {
                    return Deduped::Replayed(replayed(Recorded {
                        result,
                        outcome: outcome.as_deref().and_then(Outcome::parse),
                    }));
                }
                Ok(Entry::InFlight {
                    window_ms: theirs, ..
                }) if ttl_ms > i64::try_from(theirs).unwrap_or(i64::MAX)
                    && give_up_at.is_none_or(|at| Instant::now() < at) =>
                {
                    waited = true;
                    tokio::time::sleep(POLL_EVERY).await;
                }
                Ok(Entry::InFlight { .. }) => {
                    return Deduped::NotRun(effect_unknown(
                        "an identical call began but its answer was never recorded (its gateway may have stopped)",
                    ));
                }
                Ok(Entry::Abandoned) => {
                    return Deduped::NotRun(effect_unknown(
                        "an identical call was in flight and was abandoned",
                    ));
                }
                Err(e) => {
                    // Not ours to interpret (another version's format?): running could repeat it.
                    tracing::warn!(key = %redis_key, error = %e, "unreadable dedupe entry in Redis");
                    return Deduped::NotRun(effect_unknown(
                        "an identical call left a record this gateway cannot read",
                    ));
                }
            }
        }

        let mut guard = AbandonOnDrop {
            inner: self.inner.clone(),
            key: redis_key.clone(),
            marker: marker.clone(),
            window_ms,
            armed: true,
        };
        let (value, record) = run.await;
        guard.armed = false;
        // Nothing recorded: the call never reached the upstream, so a repeat may run.
        let leave = match record {
            Some(recorded) => encode(&Entry::Recorded {
                result: recorded.result,
                outcome: recorded.outcome.map(|o| o.as_str().to_string()),
                arguments: key.idempotency_key.as_ref().map(|_| key.arguments.clone()),
            }),
            None => String::new(),
        };
        if let Err(why) = self
            .inner
            .finish(&redis_key, &marker, &leave, window_ms)
            .await
        {
            // The call ran; its marker stays, so duplicates answer "effect unknown" rather than
            // run it again.
            self.inner.state.failed(&format!(
                "the answer of a dedupe call could not be recorded in Redis at {}, so repeats in its window will be answered as of unknown effect: {why}",
                self.inner.state.shown_url()
            ))
            .await;
        }
        Deduped::Ran(value)
    }

    /// The answer when Redis cannot be reached: refused before running (`upstream_error`), or,
    /// for a duplicate that lost Redis while waiting, of unknown effect (the first call may
    /// have run).
    async fn unreachable(&self, tool: &str, why: &str, waited: bool) -> Recorded {
        let url = self.inner.state.shown_url().to_string();
        self.inner
            .state
            .failed(&format!(
                "dedupe records cannot be reached, calls of dedupe tools are refused (fail closed): Redis at {url} is unreachable: {why}"
            ))
            .await;
        if waited {
            return effect_unknown(&format!(
                "an identical call was in flight and the dedupe records at {url} became unreachable while waiting for it"
            ));
        }
        Recorded {
            result: CallToolResult::error(vec![ContentBlock::text(format!(
                "call refused: `{tool}` runs at most once per window, and its dedupe records at {url} cannot be reached ({why}); nothing was run, so retrying once they are reachable is safe"
            ))]),
            outcome: Some(Outcome::UpstreamError),
        }
    }
}

impl Inner {
    async fn claim(&self, key: &str, marker: &str, lifetime_ms: u64) -> Result<Claim, String> {
        let mut invocation = self.claim.prepare_invoke();
        invocation.key(key).arg(marker).arg(lifetime_ms);
        let (ours, value, ttl_ms): (i64, String, i64) = self.state.invoke(&invocation).await?;
        Ok(match ours {
            1 => Claim::Ours,
            _ => Claim::Taken { value, ttl_ms },
        })
    }

    /// Replaces this call's `marker` with `value` ('' deletes it) for `lifetime_ms`.
    async fn finish(
        &self,
        key: &str,
        marker: &str,
        value: &str,
        lifetime_ms: u64,
    ) -> Result<(), String> {
        let mut invocation = self.finish.prepare_invoke();
        invocation.key(key).arg(marker).arg(value).arg(lifetime_ms);
        let _replaced: i64 = self.state.invoke(&invocation).await?;
        Ok(())
    }
}

/// Marks the key abandoned if the running call is dropped (its client went away), so duplicates
/// learn at once that its effect is unknown instead of waiting until the marker is overdue.
struct AbandonOnDrop {
    inner: Arc<Inner>,
    key: String,
    marker: String,
    window_ms: u64,
    armed: bool,
}

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Without a runtime (process shutting down) the marker simply becomes overdue.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (inner, key, marker, window_ms) = (
            self.inner.clone(),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.marker),
            self.window_ms,
        );
        runtime.spawn(async move {
            let abandoned = encode(&Entry::Abandoned);
            if let Err(why) = inner.finish(&key, &marker, &abandoned, window_ms).await {
                inner
                    .state
                    .failed(&format!(
                        "a dropped dedupe call could not be marked abandoned: {why}"
                    ))
                    .await;
            }
        });
    }
}

/// `narrowgate:dedupe:<hex sha256>` of the call's identity. Hashed so that callers' names and
/// tools of any length or content make a fixed-size key, and encoded as a JSON array so no two
/// identities can run together into the same bytes (an idempotency key's array has four items,
/// an arguments digest's three).
fn redis_key(key: &CallKey) -> String {
    let identity = match &key.idempotency_key {
        None => serde_json::json!([key.caller, key.tool, key.arguments]),
        Some(k) => serde_json::json!([key.caller, key.tool, "idempotencyKey", k]),
    }
    .to_string();
    format!(
        "narrowgate:dedupe:{}",
        hex::encode(Sha256::digest(identity.as_bytes()))
    )
}

/// JSON of an entry. Serialising these plain types cannot fail; if it ever did, the entry would
/// be stored as abandoned: duplicates then answer "effect unknown", never run the call again.
fn encode(entry: &Entry) -> String {
    serde_json::to_string(entry).unwrap_or_else(|e| {
        tracing::error!(error = %e, "a dedupe entry could not be serialised; storing it as abandoned");
        ABANDONED.to_string()
    })
}

/// [`Entry::Abandoned`] as JSON, written out so that storing it cannot fail.
const ABANDONED: &str = r#"{"state":"abandoned"}"#;

/// Whole milliseconds, at least 1 (Redis refuses `PX 0`).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests;
