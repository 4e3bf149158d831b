//! The shared state of replicas (`state: redis://…`, docs/configuration.md): one Redis connection per user of it
//! (the rate limiter, the dedupe records), opened lazily, re-opened after a failure, with failures
//! logged at most every few seconds. Both users fail closed when Redis cannot be reached, so a
//! Redis outage shows as refused calls plus a log line, never as silently unshared state.

pub mod dedupe;
pub mod log_levels;
pub mod results;
pub mod shared_sessions;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

/// Bound on connecting to Redis and on each command: a call waits at most this for its state.
pub const REDIS_TIMEOUT: Duration = Duration::from_secs(2);
/// Redis failures are logged at most this often (each refused call still says why).
const LOG_EVERY: Duration = Duration::from_secs(5);

/// A lazily opened, shared multiplexed connection to the Redis of `state: redis://…`.
///
/// A multiplexed connection (rather than a pool or a `ConnectionManager`) because every command
/// here is a single short script call: one pipelined socket serves all concurrent calls, and
/// after a failure [`failed`](Self::failed) makes the next call reconnect, so a Redis restart
/// heals by itself without a background task.
pub struct RedisState {
    /// The URL without its password, for messages.
    shown_url: String,
    client: Result<redis::Client, String>,
    connection: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    started: Instant,
    last_log_ms: AtomicU64,
}

impl RedisState {
    /// Parses `url` (connecting happens on first use). A bad URL is logged once here, with
    /// `consequence` saying what that means for calls, and every use then fails.
    pub fn new(url: &str, consequence: &str) -> RedisState {
        let shown_url = redact_password(url);
        let client = redis::Client::open(url).map_err(|e| format!("bad Redis URL: {e}"));
        if let Err(e) = &client {
            tracing::error!(state = %shown_url, "{e}; {consequence}");
        }
        RedisState {
            shown_url,
            client,
            connection: tokio::sync::Mutex::default(),
            started: Instant::now(),
            last_log_ms: AtomicU64::new(u64::MAX),
        }
    }

    /// The Redis URL with any password masked, for messages.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// The shared connection, opened if there is none (within [`REDIS_TIMEOUT`]).
    pub async fn connection(&self) -> Result<MultiplexedConnection, String> {
        let mut slot = self.connection.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(REDIS_TIMEOUT))
            .set_response_timeout(Some(REDIS_TIMEOUT));
        let connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| e.to_string())?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Runs a prepared script call on the shared connection, within [`REDIS_TIMEOUT`].
    pub async fn invoke<T: redis::FromRedisValue>(
        &self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T, String> {
        let mut connection = self.connection().await?;
        tokio::time::timeout(REDIS_TIMEOUT, invocation.invoke_async(&mut connection))
            .await
            .map_err(|_| format!("no answer within {REDIS_TIMEOUT:?}"))?
            .map_err(|e| e.to_string())
    }

    /// After a failure: drops the connection, so the next call reconnects, and logs `message`
    /// (rate-limited, see [`log_failure`](Self::log_failure)).
    pub async fn failed(&self, message: &str) {
        *self.connection.lock().await = None;
        self.log_failure(message);
    }

    /// Logs `message` as an error unless one was logged in the last [`LOG_EVERY`]: an outage
    /// under load must not flood the log, yet must be visible in it.
    pub fn log_failure(&self, message: &str) {
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.last_log_ms.load(Ordering::Relaxed);
        let due = last == u64::MAX || now_ms.saturating_sub(last) >= LOG_EVERY.as_millis() as u64;
        if due
            && self
                .last_log_ms
                .compare_exchange(last, now_ms, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            tracing::error!("{message}");
        }
    }
}

/// `redis://user:secret@host` → `redis://user:***@host`.
pub fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The host follows the last `@`, as URL parsers read it; the password may contain `@`.
    match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: a password in the state URL never reaches a message, and a URL without one is
    /// shown as is.
    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            redact_password("redis://u:pw@127.0.0.1:6379/0"),
            "redis://u:***@127.0.0.1:6379/0"
        );
        assert_eq!(redact_password("redis://h:1"), "redis://h:1");
        // A password holding `@`: the host is after the last one.
        assert_eq!(
            redact_password("redis://u:p@ss@h:6379"),
            "redis://u:***@h:6379"
        );
    }
}
