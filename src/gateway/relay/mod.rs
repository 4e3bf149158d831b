//! What travels between a client and an upstream besides a tool's arguments and result: the
//! request's `_meta` ([`meta`]), the protocol version a client is offered ([`version`]), the
//! upstream's progress and log messages and the client's cancellation ([`client`], with the
//! sessions' logging levels in [`levels`]), the upstream's requests of the client ([`asks`]).
//! Each is decided here, in one place, so both entry paths (rmcp's handler and the direct path)
//! apply the same rule.

pub mod asks;
pub mod client;
pub mod levels;
pub mod meta;
pub mod version;

/// Whether a `tools/call` needs a stream to the client (progress asked for, or its session set a
/// logging level): then the direct path, which writes one JSON answer, leaves it to rmcp.
pub fn wants_stream(
    meta: Option<&rmcp::model::RequestMetaObject>,
    session: Option<&str>,
    levels: &levels::LogLevels,
) -> bool {
    meta.is_some_and(|m| m.0.0.contains_key("progressToken"))
        || session.is_some_and(|s| levels.of(s).is_some())
}
