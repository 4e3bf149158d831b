//! `logging/setLevel` per client session: the gateway answers it and remembers the level, and
//! relays an upstream's log messages about a session's calls at or above it. A session that never
//! set a level gets none (MCP leaves it to the server; the gateway sends only what was asked for,
//! which also keeps such sessions' calls on the direct path).

// Logging is deprecated by SEP-2577 (2026-07-28); 2025 revisions, which clients still speak,
// have it.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::LoggingLevel;

/// Sessions remembered at most; beyond, the oldest set level is forgotten (that session then
/// gets no log messages until it sets one again). Sessions end without telling this map.
const MAX_SESSIONS: usize = 65_536;

/// The levels sessions set.
#[derive(Default)]
pub struct LogLevels {
    levels: Mutex<(
        HashMap<String, LoggingLevel>,
        std::collections::VecDeque<String>,
    )>,
    /// Whether any session ever set one: until then, no call looks (the direct path's cost).
    any: AtomicBool,
}

impl LogLevels {
    pub fn set(&self, session: &str, level: LoggingLevel) {
        let mut guard = self.levels.lock().unwrap_or_else(|p| p.into_inner());
        let (levels, order) = &mut *guard;
        if levels.insert(session.to_string(), level).is_none() {
            order.push_back(session.to_string());
            if order.len() > MAX_SESSIONS
                && let Some(oldest) = order.pop_front()
            {
                levels.remove(&oldest);
            }
        }
        self.any.store(true, Ordering::Relaxed);
    }

    /// The level `session` set, if any.
    pub fn of(&self, session: &str) -> Option<LoggingLevel> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let guard = self.levels.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.get(session).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: a level is remembered per session, and the map stays bounded (the oldest is
    /// forgotten first).
    #[test]
    fn levels_are_per_session_and_bounded() {
        let levels = LogLevels::default();
        assert_eq!(levels.of("a"), None);
        levels.set("a", LoggingLevel::Warning);
        levels.set("b", LoggingLevel::Debug);
        assert_eq!(levels.of("a"), Some(LoggingLevel::Warning));
        assert_eq!(levels.of("b"), Some(LoggingLevel::Debug));
        for n in 0..MAX_SESSIONS {
            levels.set(&format!("s{n}"), LoggingLevel::Info);
        }
        assert_eq!(levels.of("a"), None);
        assert_eq!(levels.of("s1"), Some(LoggingLevel::Info));
    }
}
