//! Who opened each MCP session: the HTTP layer (`crate::edge`) refuses a session to anyone
//! but its owner, and tells the direct path (`crate::mcp::direct`) the version a session was opened
//! with and whether rmcp has handled one of its requests lately.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sessions idle longer than this are forgotten (rmcp closes them after 5 minutes).
const SESSION_IDLE: Duration = Duration::from_secs(600);

/// Which caller opened each MCP session, so nobody else can use it, and when rmcp last handled
/// one of its requests (the direct path must leave it one now and then, see
/// [`crate::mcp::direct`]).
#[derive(Default)]
pub struct SessionOwners {
    sessions: Mutex<HashMap<String, Session>>,
}

struct Session {
    owner: String,
    /// The protocol version its `initialize` asked for: what rmcp's handler sees as the
    /// session's version, and so what the direct path must answer with.
    version: Option<String>,
    seen: Instant,
    seen_by_rmcp: Instant,
    /// When its shared record (`state: redis://…`) was last written.
    recorded: Instant,
}

impl SessionOwners {
    /// Whether `caller` may use `session`: only its owner may. A session id this table does not
    /// know (never opened here, forgotten after a long idle, or made up) is refused too: failing
    /// open there would hand a session whose record was pruned to anyone who presents its id.
    pub(crate) fn admits(&self, session: &str, caller: &str) -> bool {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        match sessions.get_mut(session) {
            Some(s) if s.owner == caller => {
                s.seen = Instant::now();
                true
            }
            _ => false,
        }
    }
    pub(crate) fn record(&self, session: &str, caller: &str, version: Option<String>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if sessions.len() > 1024 {
            prune(&mut sessions, SESSION_IDLE);
        }
        let now = Instant::now();
        sessions.insert(
            session.to_string(),
            Session {
                owner: caller.to_string(),
                version,
                seen: now,
                seen_by_rmcp: now,
                recorded: now,
            },
        );
    }
    /// Whether `session`'s shared record is older than `after` (and so due for renewal); if so,
    /// it counts as renewed from now.
    pub(crate) fn renewal_due(&self, session: &str, after: Duration) -> bool {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        match sessions.get_mut(session) {
            Some(s) if s.recorded.elapsed() >= after => {
                s.recorded = Instant::now();
                true
            }
            _ => false,
        }
    }
    /// How many sessions `caller` holds, and how many all callers together hold.
    pub(crate) fn counts(&self, caller: &str) -> (usize, usize) {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let mine = sessions.values().filter(|s| s.owner == caller).count();
        (mine, sessions.len())
    }
    /// The ids of `caller`'s sessions, or of every session.
    pub(crate) fn ids(&self, caller: Option<&str>) -> Vec<String> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions
            .iter()
            .filter(|(_, s)| caller.is_none_or(|c| s.owner == c))
            .map(|(id, _)| id.clone())
            .collect()
    }
    pub(crate) fn forget(&self, session: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.remove(session);
    }
    /// rmcp handles a request of `session` now.
    pub(crate) fn handled_by_rmcp(&self, session: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = sessions.get_mut(session) {
            s.seen_by_rmcp = Instant::now();
        }
    }
    /// The version `session` was opened with, if it is known and rmcp handled one of its
    /// requests within `within` (else the direct path leaves its requests to rmcp).
    pub(crate) fn version_if_recently_handled(
        &self,
        session: &str,
        within: Duration,
    ) -> Option<String> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions
            .get(session)
            .filter(|s| s.seen_by_rmcp.elapsed() < within)
            .and_then(|s| s.version.clone())
    }
}

/// Forgets the sessions not used for `idle`: their owners' next request is refused (404, and an
/// MCP client then opens a new session), never admitted for lack of an owner.
fn prune(sessions: &mut HashMap<String, Session>, idle: Duration) {
    sessions.retain(|_, s| s.seen.elapsed() < idle);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: only a session's owner is admitted, and a session the table no longer knows
    /// (pruned after an idle spell, or never opened) is refused to everybody: ownership fails
    /// closed.
    #[test]
    fn a_session_without_a_known_owner_is_refused() {
        let sessions = SessionOwners::default();
        sessions.record("s", "alice", None);
        assert!(sessions.admits("s", "alice"));
        assert!(!sessions.admits("s", "bob"));
        prune(
            &mut sessions.sessions.lock().expect("not poisoned"),
            Duration::ZERO,
        );
        assert!(!sessions.admits("s", "bob"), "a pruned session is nobody's");
        assert!(!sessions.admits("s", "alice"));
        assert!(!sessions.admits("made-up", "bob"));
    }

    /// Proves: a session is left to the direct path only while rmcp has handled one of its
    /// requests recently, only for a session the layer knows, and with the version its
    /// `initialize` asked for.
    #[test]
    fn a_session_goes_back_to_rmcp_once_it_has_not_seen_one_for_a_while() {
        let sessions = SessionOwners::default();
        let minute = Duration::from_secs(60);
        let v = Some("2025-06-18".to_string());
        assert_eq!(sessions.version_if_recently_handled("s", minute), None);
        sessions.record("s", "alice", v.clone());
        assert_eq!(sessions.version_if_recently_handled("s", minute), v);
        // The 10 ms "recently" must run out: that time passing is the behaviour under test.
        std::thread::sleep(Duration::from_millis(20));
        let short = Duration::from_millis(10);
        assert_eq!(sessions.version_if_recently_handled("s", short), None);
        sessions.handled_by_rmcp("s");
        assert_eq!(sessions.version_if_recently_handled("s", short), v);
        sessions.forget("s");
        assert_eq!(sessions.version_if_recently_handled("s", minute), None);
        // A session whose initialize named no version is never answered directly.
        sessions.record("t", "alice", None);
        assert_eq!(sessions.version_if_recently_handled("t", minute), None);
    }
}
