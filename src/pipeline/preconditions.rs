//! The `when` step of a `tools/call`: after the arguments validate and before rate limits, a
//! tool's preconditions must all hold. A tool without `when` passes at once (no allocation, no
//! clock read). The decision is an event (`narrowgate.precondition`) on the request's span, and
//! a denial's reason goes into the receipt.

use std::time::SystemTime;

use serde_json::Value;

use crate::contract::ToolContract;
use crate::contract::when::{self, Subject, ToolFacts};
use crate::policy::Caller;
use crate::telemetry;

/// A call a precondition denied: what the caller is told, and what the receipt records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The tool error's text.
    pub message: String,
    /// `precondition N: MESSAGE` (or `… could not be evaluated`), for the receipt.
    pub reason: String,
}

/// Checks `contract`'s preconditions for this call.
pub fn check(contract: &ToolContract, caller: &Caller, arguments: &Value) -> Result<(), Denied> {
    if contract.when.is_empty() {
        return Ok(());
    }
    let verdict = when::evaluate(
        &contract.when,
        arguments,
        &Subject {
            name: &caller.name,
            roles: &caller.roles,
            scopes: &caller.scopes,
        },
        &ToolFacts {
            name: &contract.name,
            privilege: contract.privilege,
            side_effects: contract.side_effects,
        },
        SystemTime::now(),
    );
    match verdict {
        Ok(()) => {
            telemetry::event("narrowgate.precondition", &[("outcome", "passed".into())]);
            Ok(())
        }
        Err(denial) => {
            let outcome = if denial.was_false {
                "false"
            } else {
                "unevaluable"
            };
            telemetry::event(
                "narrowgate.precondition",
                &[
                    ("outcome", outcome.into()),
                    ("index", denial.index.to_string()),
                ],
            );
            let reason = if denial.was_false {
                format!("precondition {}: {}", denial.index, denial.message)
            } else {
                format!("precondition {} could not be evaluated", denial.index)
            };
            Err(Denied {
                message: denial.message,
                reason,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ContractSet;
    use serde_json::json;

    fn contracts() -> ContractSet {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("c.yaml"),
            "upstream: a\ntools:\n  free: {}\n  guarded:\n    input: {type: object, properties: \
             {n: {type: integer}}}\n    when:\n      - {expr: 'args.n < 3', message: n must be \
             under 3}\n      - {expr: 'args.n', message: never}\n",
        )
        .expect("write");
        ContractSet::load_dir(dir.path()).expect("loads")
    }

    fn caller() -> Caller {
        Caller {
            name: "alice".into(),
            tools: vec!["*".into()],
            resources: vec![],
            prompts: vec![],
            scopes: vec![],
            roles: vec![],
            rate: None,
            claims: serde_json::Value::Null,
            discovery: Default::default(),
            always: vec![],
        }
    }

    /// Proves: a tool without `when` passes whatever its arguments; a false precondition
    /// answers its message with the reason naming it; one that does not evaluate to a boolean
    /// denies with a reason saying so.
    #[test]
    fn denials_carry_message_and_reason() {
        let set = contracts();
        assert_eq!(
            check(&set.tools["free"], &caller(), &json!({"n": 9})),
            Ok(())
        );
        let guarded = &set.tools["guarded"];
        assert_eq!(
            check(guarded, &caller(), &json!({"n": 5})),
            Err(Denied {
                message: "n must be under 3".into(),
                reason: "precondition 0: n must be under 3".into(),
            })
        );
        let unevaluable = check(guarded, &caller(), &json!({"n": 1})).unwrap_err();
        assert_eq!(unevaluable.reason, "precondition 1 could not be evaluated");
    }
}
