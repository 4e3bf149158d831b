//! A tool's `relay:` key: which requests its upstream may send to the calling client while the
//! tool runs (`sampling/createMessage`, `elicitation/create`, `roots/list`). All are allowed by
//! default: the client decides what it declared, and the user answers each one. An operator who
//! knows a tool has no business asking the client's model or user anything refuses it here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which requests from the upstream to the client a tool's calls relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Relayed requests")]
pub struct RelayPolicy {
    /// `sampling/createMessage`: the upstream asks the client's model for a completion.
    #[serde(default = "allowed")]
    pub sampling: bool,
    /// `elicitation/create`: the upstream asks the client's user for input.
    #[serde(default = "allowed")]
    pub elicitation: bool,
    /// `roots/list`: the upstream asks which directories the client works in.
    #[serde(default = "allowed")]
    pub roots: bool,
}

fn allowed() -> bool {
    true
}

impl Default for RelayPolicy {
    fn default() -> Self {
        RelayPolicy {
            sampling: true,
            elicitation: true,
            roots: true,
        }
    }
}

impl RelayPolicy {
    /// Nothing relayed (a call of no published tool).
    pub const REFUSED: RelayPolicy = RelayPolicy {
        sampling: false,
        elicitation: false,
        roots: false,
    };

    /// Whether `method` (one of the three) is relayed; any other method is not.
    pub fn allows(&self, method: &str) -> bool {
        match method {
            "sampling/createMessage" => self.sampling,
            "elicitation/create" => self.elicitation,
            "roots/list" => self.roots,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: an absent key allows a relay, `false` refuses it, an unknown key is a load error,
    /// and a method that is none of the three is never allowed.
    #[test]
    fn absent_keys_allow_and_false_refuses() {
        let policy: RelayPolicy =
            serde_json::from_value(serde_json::json!({"sampling": false})).expect("valid");
        assert!(!policy.allows("sampling/createMessage"));
        assert!(policy.allows("elicitation/create"));
        assert!(policy.allows("roots/list"));
        assert!(!policy.allows("tools/call"));
        assert!(
            serde_json::from_value::<RelayPolicy>(serde_json::json!({"smapling": false})).is_err()
        );
    }
}
