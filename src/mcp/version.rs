//! Which protocol version a client is offered at `initialize`.
//!
//! MCP's rule: a server that supports the version the client asked for answers with it;
//! otherwise it answers with another it supports, and the client decides whether it can go on.
//! The gateway then offers the supported version closest to the client's: the oldest one newer
//! than it (a client pinned to an older revision most likely also speaks the next one), else the
//! newest one with an `initialize` handshake (a client newer than every version the gateway
//! knows). rmcp's own rule offers its default (the newest) to everyone.

use rmcp::model::ProtocolVersion;

/// The version to answer a client that asked for `requested`, from `supported`.
pub fn offered(requested: &ProtocolVersion, supported: &[ProtocolVersion]) -> ProtocolVersion {
    let with_initialize = || supported.iter().filter(|v| v.has_initialize());
    if with_initialize().any(|v| v == requested) {
        return requested.clone();
    }
    // Revisions are dates: their text orders them.
    with_initialize()
        .filter(|v| v.as_str() > requested.as_str())
        .min_by(|a, b| a.as_str().cmp(b.as_str()))
        .or_else(|| with_initialize().max_by(|a, b| a.as_str().cmp(b.as_str())))
        .cloned()
        .unwrap_or_else(|| requested.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::handler::PROTOCOL_VERSIONS;

    /// Proves: a supported version is answered as asked; 2024-11-05, which the gateway does not
    /// serve, is offered the closest newer one (2025-03-26, not the newest); a version newer than
    /// all is offered the newest with an `initialize` handshake.
    #[test]
    fn the_closest_supported_version_is_offered() {
        for v in [
            ProtocolVersion::V_2025_03_26,
            ProtocolVersion::V_2025_06_18,
            ProtocolVersion::V_2025_11_25,
        ] {
            assert_eq!(offered(&v, PROTOCOL_VERSIONS), v);
        }
        assert_eq!(
            offered(&ProtocolVersion::V_2024_11_05, PROTOCOL_VERSIONS),
            ProtocolVersion::V_2025_03_26
        );
        let future: ProtocolVersion =
            serde_json::from_value(serde_json::json!("2099-01-01")).expect("a version");
        let newest = offered(&future, PROTOCOL_VERSIONS);
        assert!(newest.has_initialize());
        assert_eq!(newest, ProtocolVersion::V_2025_11_25);
    }
}
