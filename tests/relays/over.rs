//! The kinds of upstream connection the relay tests run over, each with the demo upstream: the
//! forwarder to an HTTP upstream spoken to in 2026-07-28 (stateless) and to one on a 2025-11-25
//! session (`--legacy`), and rmcp's client to a stdio child speaking 2026-07-28 (its calls
//! through rmcp's `Peer`, MRTR included) and one speaking 2025-11-25 (`stdio --legacy`).

use crate::common::{Gateway, HttpUpstream, demo_upstream_bin};

/// One kind of upstream connection.
#[derive(Clone, Copy)]
pub enum Over<'a> {
    /// The demo upstream over HTTP, started by [`Upstreams::start`]; its description.
    Http(&'a HttpUpstream, &'static str),
    /// The demo upstream as a stdio child of the gateway, `--legacy` or not.
    Stdio { legacy: bool },
}

/// The two HTTP demo upstreams (2026-07-28 and `--legacy`) the HTTP kinds reach, stopped on
/// drop.
pub struct Upstreams {
    modern: HttpUpstream,
    legacy: HttpUpstream,
}

impl Upstreams {
    pub fn start() -> Upstreams {
        Upstreams {
            modern: HttpUpstream::start(&[]),
            legacy: HttpUpstream::start(&["--legacy"]),
        }
    }

    /// Every kind, HTTP ones first.
    pub fn every(&self) -> [Over<'_>; 4] {
        [
            Over::Http(&self.modern, "http, 2026-07-28 stateless"),
            Over::Http(&self.legacy, "http, 2025-11-25 session"),
            Over::Stdio { legacy: false },
            Over::Stdio { legacy: true },
        ]
    }
}

impl Over<'_> {
    /// Which way the gateway reaches the upstream, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Over::Http(_, name) => name,
            Over::Stdio { legacy: false } => "stdio, 2026-07-28",
            Over::Stdio { legacy: true } => "stdio, 2025-11-25",
        }
    }

    pub fn is_stdio(&self) -> bool {
        matches!(self, Over::Stdio { .. })
    }

    /// The `upstreams:` block naming the demo upstream `demo` this way, then `rest`.
    pub fn config(&self, rest: &str) -> String {
        match self {
            Over::Http(upstream, _) => {
                format!("upstreams:\n  demo:\n    url: {}\n{rest}", upstream.url)
            }
            Over::Stdio { legacy } => format!(
                "upstreams:\n  demo:\n    command: {}\n    args: [stdio{}]\n{rest}",
                demo_upstream_bin().display(),
                if *legacy { ", --legacy" } else { "" }
            ),
        }
    }

    /// The protocol the connection speaks.
    pub fn protocol(&self) -> &'static str {
        match self {
            Over::Http(_, name) if name.contains("2025") => "2025-11-25",
            Over::Stdio { legacy: true } => "2025-11-25",
            _ => "2026-07-28",
        }
    }

    /// Panics unless `gateway`'s `/readyz` reports the demo upstream, up, on this connection's
    /// protocol: a test meant for one protocol never runs on the other unnoticed.
    pub fn assert_spoken(&self, gateway: &Gateway) {
        let ready = gateway.readyz();
        assert_eq!(
            ready["upstreams"]["demo"]["protocol"],
            self.protocol(),
            "{}: {ready}",
            self.name()
        );
    }
}
