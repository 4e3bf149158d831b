//! Session ownership shared by replicas (`state: redis://…`): which caller holds which MCP
//! sessions across the whole fleet, so that `http.max_sessions_per_caller` bounds a caller's
//! sessions on all replicas together, not on each (three replicas would otherwise give every
//! caller three times its share).
//!
//! A session still lives in the one replica that answered its `initialize` (the load balancer
//! routes its requests there, docs/operations.md); what is shared is its record: one sorted set
//! per caller in Redis, each member a session id scored with the time it lapses. A replica adds
//! its sessions when they open, removes them when they are deleted, and renews a session's record
//! at most once a minute while it is in use, so the records cost no Redis round trip per call. A
//! replica that dies leaves its sessions' records to lapse within [`RECORD_LIFETIME`]: a dead
//! replica's sessions count against their callers for at most that long.
//!
//! While Redis cannot be reached, each replica counts a caller's sessions on its own (the limit
//! then holds per replica, as without Redis) and logs why; renewing and removing records are
//! best effort (a record that was not removed lapses).
//! Without Redis, the local ownership table ([`crate::edge::sessions`]) is the whole truth.

use std::time::Duration;

use crate::config::{Config, StateBackend};
use crate::state::RedisState;

/// How long a session's record lasts without renewal (rmcp closes a session after 5 minutes
/// without a request).
pub const RECORD_LIFETIME: Duration = Duration::from_secs(300);
/// A session in use has its record renewed when it is older than this.
pub const RENEW_AFTER: Duration = Duration::from_secs(60);

/// Drops lapsed records and counts the caller's sessions. KEYS[1]: the caller's set.
const COUNT_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
";

/// Adds or renews a session's record. KEYS[1]: the caller's set; ARGV[1]: the session id;
/// ARGV[2]: the record's lifetime (ms).
const RECORD_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lifetime = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + lifetime, ARGV[1])
redis.call('PEXPIRE', KEYS[1], lifetime)
return 1
";

/// Removes a session's record. KEYS[1]: the caller's set; ARGV[1]: the session id.
const REMOVE_SCRIPT: &str = r"
return redis.call('ZREM', KEYS[1], ARGV[1])
";

/// Where sessions are counted: this process only, or the fleet through Redis.
pub enum SharedSessions {
    Local,
    Redis(Box<RedisSessions>),
}

pub struct RedisSessions {
    state: RedisState,
    count: redis::Script,
    record: redis::Script,
    remove: redis::Script,
}

impl SharedSessions {
    pub fn from_config(config: &Config) -> SharedSessions {
        SharedSessions::new(&config.state_backend().unwrap_or(StateBackend::Memory))
    }

    pub fn new(state: &StateBackend) -> SharedSessions {
        match state {
            StateBackend::Memory => SharedSessions::Local,
            StateBackend::Redis(url) => SharedSessions::Redis(Box::new(RedisSessions {
                state: RedisState::new(url, "sessions are counted per replica"),
                count: redis::Script::new(COUNT_SCRIPT),
                record: redis::Script::new(RECORD_SCRIPT),
                remove: redis::Script::new(REMOVE_SCRIPT),
            })),
        }
    }

    /// Whether this is the store for `state` (a reload that keeps `state:` keeps the store).
    pub fn serves(&self, state: &StateBackend) -> bool {
        match (self, state) {
            (SharedSessions::Local, StateBackend::Memory) => true,
            (SharedSessions::Redis(r), StateBackend::Redis(url)) => {
                r.state.shown_url() == crate::state::redact_password(url)
            }
            _ => false,
        }
    }

    /// Whether sessions are shared (else the local table counts them).
    pub fn is_shared(&self) -> bool {
        matches!(self, SharedSessions::Redis(_))
    }

    /// How many sessions `caller` holds on all replicas together; `None` when not shared.
    /// `Err` when Redis cannot say (logged here).
    pub async fn held_by(&self, caller: &str) -> Result<Option<usize>, String> {
        let SharedSessions::Redis(r) = self else {
            return Ok(None);
        };
        let invocation = r.count.key(key_of(caller));
        match r.state.invoke::<usize>(&invocation).await {
            Ok(n) => Ok(Some(n)),
            Err(e) => {
                let message = format!(
                    "cannot count the sessions of `{caller}` in Redis ({}): {e}; counting them \
                     on this replica only",
                    r.state.shown_url()
                );
                r.state.failed(&message).await;
                Err(message)
            }
        }
    }

    /// Records (or renews the record of) `session`, held by `caller` on this replica.
    pub async fn record(&self, session: &str, caller: &str) {
        let SharedSessions::Redis(r) = self else {
            return;
        };
        let lifetime_ms = RECORD_LIFETIME.as_millis() as u64;
        let mut invocation = r.record.key(key_of(caller));
        invocation.arg(session).arg(lifetime_ms);
        if let Err(e) = r.state.invoke::<i64>(&invocation).await {
            let message = format!(
                "cannot record a session of `{caller}` in Redis ({}): {e}; it counts against \
                 the caller's sessions only on this replica",
                r.state.shown_url()
            );
            r.state.failed(&message).await;
        }
    }

    /// Removes `session`'s record (it was deleted or closed).
    pub async fn remove(&self, session: &str, caller: &str) {
        let SharedSessions::Redis(r) = self else {
            return;
        };
        let mut invocation = r.remove.key(key_of(caller));
        invocation.arg(session);
        if let Err(e) = r.state.invoke::<i64>(&invocation).await {
            let message = format!(
                "cannot remove a session of `{caller}` from Redis ({}): {e}; its record lapses \
                 within {} s",
                r.state.shown_url(),
                RECORD_LIFETIME.as_secs()
            );
            r.state.failed(&message).await;
        }
    }
}

/// The caller's set. Caller names are validated at load (no spaces or control characters); the
/// braces keep a caller's keys in one Redis Cluster slot, as the rate limits' keys do.
fn key_of(caller: &str) -> String {
    format!("narrowgate:sessions:{{{caller}}}")
}
