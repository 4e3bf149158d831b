//! What a contract declares about a tool's effects and who approves it: the vocabulary of
//! `privilege`, `side_effects` and `approval`, published as annotations and enforced by the pipeline.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a tool does to the world.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Privilege {
    Read,
    // The default when a contract does not say: assume the tool changes something.
    #[default]
    Write,
    Execute,
}

/// Who must approve a call before it is forwarded.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// Calls are forwarded without asking anyone.
    #[default]
    None,
    /// The calling client's user accepts each call (MCP elicitation).
    User,
    /// A configured approver accepts each call (`narrowgate approvals`, `/approvals`).
    Approver,
}

/// How long a call waits for an approver when the contract does not say.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(300);

/// Whether a tool's effects can be undone.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SideEffects {
    None,
    Reversible,
    Irreversible,
}
