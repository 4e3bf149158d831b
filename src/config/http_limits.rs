//! The `http:` block: the HTTP server's own limits, so that no client, however slow, careless or
//! hostile, can make the gateway hold memory, connections or streams without bound. Every key
//! has a default that suits one gateway on its own machine; what is over a limit is answered 503
//! with `Retry-After` (or 408 for a timeout), never left to pile up.
//!
//! ```yaml
//! http:
//!   header_timeout: 10s              # a request's headers must arrive within this
//!   body_timeout: 30s                # a request's body must arrive within this, once its headers did
//!   max_connections: 512             # open connections, all clients together
//!   max_connections_per_client: 128  # open connections from one client address
//!   max_sessions: 4096               # MCP sessions, all callers together
//!   max_sessions_per_caller: 256     # MCP sessions of one caller
//!   max_streams: 1024                # open SSE streams (GET, subscriptions/listen), all callers
//!   max_streams_per_caller: 256      # open SSE streams of one caller
//! ```

use schemars::JsonSchema;
use serde::Deserialize;

use super::units::ConfigDuration;

/// The HTTP server's limits (the `http:` block), defaults filled in.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// How long a client may take to send a request's headers, from the connection's start or
    /// the end of its previous request: a client that sends them a byte at a time (slow loris)
    /// is cut off instead of holding a connection forever.
    pub header_timeout: ConfigDuration,
    /// How long a client may take to send a request's body once its headers are in: 408 after
    /// that. Bodies are only read from authenticated callers.
    pub body_timeout: ConfigDuration,
    /// Connections open at once, all clients together (the default, 512, leaves room under the
    /// common open-file limit of 1024). A connection over a limit is still
    /// accepted and read, but answers only `/healthz`, `/readyz` and `/metrics`; any other
    /// request gets 503 with `Retry-After`, and the connection is closed after it.
    #[schemars(range(min = 1))]
    pub max_connections: usize,
    /// Connections open at once from one client address (an IPv6 client: its /64 network; the
    /// TCP peer: behind a reverse proxy every client has the proxy's address, so raise it to
    /// `max_connections` there).
    #[schemars(range(min = 1))]
    pub max_connections_per_client: usize,
    /// MCP sessions open at once, all callers together: an `initialize` over it gets 503.
    #[schemars(range(min = 1))]
    pub max_sessions: usize,
    /// MCP sessions open at once for one caller. Sessions a client never deletes count until
    /// the gateway closes them after 5 minutes without a request.
    #[schemars(range(min = 1))]
    pub max_sessions_per_caller: usize,
    /// SSE streams open at once (a session's GET stream, a 2026-07-28 `subscriptions/listen`),
    /// all callers together.
    #[schemars(range(min = 1))]
    pub max_streams: usize,
    /// SSE streams open at once for one caller.
    #[schemars(range(min = 1))]
    pub max_streams_per_caller: usize,
}

impl Default for HttpConfig {
    fn default() -> HttpConfig {
        use std::time::Duration;
        HttpConfig {
            header_timeout: ConfigDuration(Duration::from_secs(10)),
            body_timeout: ConfigDuration(Duration::from_secs(30)),
            max_connections: 512,
            max_connections_per_client: 128,
            max_sessions: 4096,
            max_sessions_per_caller: 256,
            max_streams: 1024,
            max_streams_per_caller: 256,
        }
    }
}

impl HttpConfig {
    /// What is wrong with these limits, as (key under `http`, message).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        for (key, timeout) in [
            ("header_timeout", self.header_timeout),
            ("body_timeout", self.body_timeout),
        ] {
            if timeout.0.is_zero() {
                return Some((key, "must be longer than 0, e.g. 10s".into()));
            }
        }
        let pairs = [
            (
                "max_connections",
                self.max_connections,
                "max_connections_per_client",
                self.max_connections_per_client,
            ),
            (
                "max_sessions",
                self.max_sessions,
                "max_sessions_per_caller",
                self.max_sessions_per_caller,
            ),
            (
                "max_streams",
                self.max_streams,
                "max_streams_per_caller",
                self.max_streams_per_caller,
            ),
        ];
        for (all_key, all, each_key, each) in pairs {
            for (key, value) in [(all_key, all), (each_key, each)] {
                if value == 0 {
                    return Some((key, "must be at least 1".into()));
                }
            }
            if each > all {
                return Some((
                    each_key,
                    format!("{each} is more than {all_key} ({all}): lower it or raise {all_key}"),
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: the defaults are valid; a zero timeout or limit and a per-client limit above the
    /// overall one are refused, naming the key.
    #[test]
    fn limits_are_checked() {
        assert_eq!(HttpConfig::default().problem(), None);
        let zero = HttpConfig {
            max_sessions: 0,
            ..HttpConfig::default()
        };
        assert_eq!(zero.problem().map(|p| p.0), Some("max_sessions"));
        let wider = HttpConfig {
            max_connections_per_client: 2000,
            ..HttpConfig::default()
        };
        assert_eq!(
            wider.problem().map(|p| p.0),
            Some("max_connections_per_client")
        );
        let instant = HttpConfig {
            body_timeout: ConfigDuration(std::time::Duration::ZERO),
            ..HttpConfig::default()
        };
        assert_eq!(instant.problem().map(|p| p.0), Some("body_timeout"));
    }
}
