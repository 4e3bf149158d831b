//! What travels between a client and an upstream besides a tool's arguments and result: the
//! request's `_meta` ([`meta`]), the protocol version a client is offered ([`version`]), the
//! upstream's progress and log messages and the client's cancellation ([`client`], with the
//! sessions' logging levels in [`levels`]), the upstream's requests of the client ([`asks`], and [`parked`] for stateless clients).
//! Each is decided here, in one place, so both entry paths (rmcp's handler and the direct path)
//! apply the same rule.

pub mod asks;
pub mod client;
pub mod meta;

/// Whether a `tools/call` needs a stream to the client (progress asked for, or its session set a
/// logging level): then the direct path, which writes one JSON answer, leaves it to rmcp.
pub fn wants_stream(
    meta: Option<&rmcp::model::RequestMetaObject>,
    session: Option<&str>,
    levels: &crate::state::log_levels::LogLevels,
) -> bool {
    meta.is_some_and(|m| m.0.0.contains_key("progressToken"))
        || session.is_some_and(|s| levels.of(s).is_some())
}

/// Whether the upstream of a stateless `tools/call` could ask its client something: the client
/// declared `sampling`, `elicitation` or `roots` in the request's `_meta`. Then the direct path,
/// which cannot park a call, leaves it to rmcp (`parked`).
pub fn may_ask(meta: Option<&rmcp::model::RequestMetaObject>) -> bool {
    meta.and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"))
        .and_then(serde_json::Value::as_object)
        .is_some_and(|c| {
            ["sampling", "elicitation", "roots"]
                .iter()
                .any(|k| c.get(*k).is_some_and(|v| !v.is_null()))
        })
}
