//! The result cache (`cache: 60s` on a read-only, idempotent tool, docs/semantics.md): an
//! identical call inside the window is answered from memory instead of the upstream.
//!
//! A key names everything an answer depends on: who may share it (the caller, unless
//! `cache_scope: shared`), the tool, its contract's digest (so a reload that changes the
//! contract never serves an answer checked against the old one) and the digest of the arguments
//! sent upstream. Only successful results are kept. Each replica caches for itself: a cache
//! saves upstream calls, it promises nothing across replicas.
//!
//! Bounded in entries and in bytes: when full, expired entries are swept; if it is still full,
//! the answer is simply not cached (a cache that evicted by recency would need a second index
//! for a saving the window already bounds).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::CallToolResult;

/// At most this many answers are held.
const MAX_ENTRIES: usize = 10_000;
/// At most about this many bytes of answers (their JSON length) are held.
const MAX_BYTES: usize = 64 * 1024 * 1024;

/// What a cached answer is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResultKey {
    /// The caller whose answer it is; `None` for `cache_scope: shared`.
    pub caller: Option<String>,
    pub tool: String,
    pub contract_digest: String,
    pub arguments_digest: String,
}

struct Entry {
    result: CallToolResult,
    expires: Instant,
    bytes: usize,
}

#[derive(Default)]
struct Held {
    entries: HashMap<ResultKey, Entry>,
    bytes: usize,
}

/// The cached answers of one gateway process (kept across reloads: keys carry the contract's
/// digest).
#[derive(Default)]
pub struct ResultCache {
    held: Mutex<Held>,
}

impl ResultCache {
    /// The answer cached under `key`, if it has not expired.
    pub fn get(&self, key: &ResultKey) -> Option<CallToolResult> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.entries
            .get(key)
            .filter(|e| e.expires > Instant::now())
            .map(|e| e.result.clone())
    }

    /// Keeps `result` under `key` for `window`, if there is room.
    pub fn put(&self, key: ResultKey, result: &CallToolResult, window: Duration) {
        let bytes = serde_json::to_vec(result).map(|v| v.len()).unwrap_or(0);
        if bytes > MAX_BYTES / 16 {
            return;
        }
        let now = Instant::now();
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = held.entries.remove(&key) {
            held.bytes -= old.bytes;
        }
        if held.entries.len() >= MAX_ENTRIES || held.bytes + bytes > MAX_BYTES {
            let Held {
                entries,
                bytes: total,
            } = &mut *held;
            entries.retain(|_, e| {
                let live = e.expires > now;
                if !live {
                    *total -= e.bytes;
                }
                live
            });
            if entries.len() >= MAX_ENTRIES || *total + bytes > MAX_BYTES {
                return;
            }
        }
        held.bytes += bytes;
        held.entries.insert(
            key,
            Entry {
                result: result.clone(),
                expires: now + window,
                bytes,
            },
        );
    }

    /// How many answers are held (expired ones included until swept).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn key(caller: Option<&str>, arguments: &str) -> ResultKey {
        ResultKey {
            caller: caller.map(str::to_string),
            tool: "read".into(),
            contract_digest: "sha256:c".into(),
            arguments_digest: arguments.into(),
        }
    }

    /// Proves: an answer is found only under its own key (another caller, other arguments miss),
    /// and not after its window.
    #[test]
    fn answers_are_found_only_under_their_key_and_window() {
        let cache = ResultCache::default();
        let result = CallToolResult::success(vec![ContentBlock::text("42")]);
        cache.put(key(Some("alice"), "a1"), &result, Duration::from_secs(60));
        assert!(cache.get(&key(Some("alice"), "a1")).is_some());
        assert!(
            cache.get(&key(Some("bob"), "a1")).is_none(),
            "another caller"
        );
        assert!(cache.get(&key(None, "a1")).is_none(), "the shared scope");
        assert!(
            cache.get(&key(Some("alice"), "a2")).is_none(),
            "other arguments"
        );
        cache.put(key(None, "a3"), &result, Duration::ZERO);
        assert!(cache.get(&key(None, "a3")).is_none(), "expired");
    }

    /// Proves: the cache never holds more than its bound of entries; expired ones make room.
    #[test]
    fn the_cache_is_bounded() {
        let cache = ResultCache::default();
        let result = CallToolResult::success(vec![ContentBlock::text("x")]);
        for i in 0..MAX_ENTRIES + 10 {
            cache.put(key(None, &i.to_string()), &result, Duration::from_secs(60));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        cache.put(key(None, "late"), &result, Duration::from_secs(60));
        assert!(cache.get(&key(None, "late")).is_none(), "full: not cached");
    }
}
