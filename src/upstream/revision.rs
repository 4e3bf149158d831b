//! Which revision an HTTP upstream that serves both is spoken to in: 2026-07-28, unless it serves
//! less there than in a 2025-11-25 session.
//!
//! Some servers carry 2026-07-28 beside a session path they keep for older clients, and serve
//! the new path partly: the conformance suite's own reference server declares on it no resource
//! subscriptions, no resource list changes and no completions (which its sessions declare), and
//! its tools cannot ask the client anything there (their `sampling/createMessage` is refused
//! inside the server). A client that reached it directly in a session would lose none of that;
//! through the gateway on 2026-07-28 it would. So after a 2026-07-28 handshake the gateway opens
//! a probe session (`initialize`, then closed) and compares what each declares; when the
//! session declares a capability the new path lacks, the connection is made again as a session.
//! Logging is left out of the comparison: 2026-07-28 has no `logging/setLevel`.

use std::collections::HashMap;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::ServerCapabilities;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// How long the probe session may take; an upstream that does not open one in time is spoken
/// to in 2026-07-28.
const PROBE_WITHIN: Duration = Duration::from_secs(5);

/// What `session` (a 2025-11-25 session's capabilities) declares that `modern` (the same
/// upstream's on 2026-07-28) does not, by name; empty when the new path serves as much.
pub fn missing_on_modern(
    modern: &ServerCapabilities,
    session: &ServerCapabilities,
) -> Vec<&'static str> {
    let on = |flag: Option<bool>| flag == Some(true);
    let mut missing = Vec::new();
    let mut check = |name, in_session: bool, in_modern: bool| {
        if in_session && !in_modern {
            missing.push(name);
        }
    };
    check("tools", session.tools.is_some(), modern.tools.is_some());
    check(
        "tools.listChanged",
        on(session.tools.as_ref().and_then(|t| t.list_changed)),
        on(modern.tools.as_ref().and_then(|t| t.list_changed)),
    );
    check(
        "resources",
        session.resources.is_some(),
        modern.resources.is_some(),
    );
    check(
        "resources.subscribe",
        on(session.resources.as_ref().and_then(|r| r.subscribe)),
        on(modern.resources.as_ref().and_then(|r| r.subscribe)),
    );
    check(
        "resources.listChanged",
        on(session.resources.as_ref().and_then(|r| r.list_changed)),
        on(modern.resources.as_ref().and_then(|r| r.list_changed)),
    );
    check(
        "prompts",
        session.prompts.is_some(),
        modern.prompts.is_some(),
    );
    check(
        "prompts.listChanged",
        on(session.prompts.as_ref().and_then(|p| p.list_changed)),
        on(modern.prompts.as_ref().and_then(|p| p.list_changed)),
    );
    check(
        "completions",
        session.completions.is_some(),
        modern.completions.is_some(),
    );
    missing
}

/// The capabilities a 2025-11-25 session with the upstream at `url` declares (`None`: it opened
/// none within [`PROBE_WITHIN`]). The session is closed at once.
pub async fn session_capabilities(
    url: &str,
    headers: HashMap<http::HeaderName, http::HeaderValue>,
) -> Option<ServerCapabilities> {
    let probe = async {
        let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
        let transport = StreamableHttpClientTransport::from_config(config);
        // `()` is rmcp's client that answers nothing: the probe only reads the handshake.
        let connection = ().serve(transport).await.ok()?;
        let capabilities = connection
            .peer()
            .peer_info()
            .filter(|info| info.protocol_version.has_initialize())
            .map(|info| info.capabilities.clone());
        let _ = connection.cancel().await;
        capabilities
    };
    tokio::time::timeout(PROBE_WITHIN, probe).await.ok()?
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capabilities(value: serde_json::Value) -> ServerCapabilities {
        serde_json::from_value(value).unwrap_or_default()
    }

    /// Proves: what the conformance suite's reference server declares in a session but not on
    /// 2026-07-28 is named (so the gateway speaks to it in a session); an upstream that declares
    /// the same on both, or more on 2026-07-28, or differs only in logging, is kept on
    /// 2026-07-28.
    #[test]
    fn a_session_that_declares_more_is_named() {
        let session = capabilities(json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {}
        }));
        let reference = capabilities(json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {}
        }));
        assert_eq!(
            missing_on_modern(&reference, &session),
            [
                "resources.subscribe",
                "resources.listChanged",
                "completions"
            ]
        );
        let mut same_but_logging = session.clone();
        same_but_logging.logging = None;
        assert!(missing_on_modern(&same_but_logging, &session).is_empty());
        assert!(missing_on_modern(&session, &reference).is_empty());
    }
}
