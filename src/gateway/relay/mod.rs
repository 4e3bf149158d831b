//! What travels between a client and an upstream besides a tool's arguments and result: the
//! request's `_meta` ([`meta`]) and the protocol version a client is offered ([`version`]).
//! Each is decided here, in one place, so both entry paths (rmcp's handler and the direct path)
//! apply the same rule.

pub mod meta;
pub mod version;
