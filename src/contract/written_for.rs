//! `written_for:`: the published server a contract file was written and reviewed against (the
//! contract library records it; `narrowgate check` compares it with the running server).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The exact server a contract file was written against.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WrittenFor {
    /// The published package and version, as installed: `pypi:mcp-server-git==2026.10.19`,
    /// `npm:@modelcontextprotocol/server-filesystem@2026.8.31`.
    pub package: String,
    /// The `serverInfo` that version reports in `initialize`.
    pub server: ServerInfo,
}

/// A server's name and version, as `initialize` reports them.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}
