//! A tool's `when` preconditions: CEL expressions over the call (`args`, `caller`, `tool`, `now`)
//! that must all hold for it to be forwarded. They are compiled when the contract loads (an
//! expression that does not compile is a load error, not a surprise at call time) and evaluated
//! by the gateway after the arguments validate. An expression that cannot be evaluated (a type
//! error, a missing key, a result that is not a boolean) denies: a precondition that cannot be
//! shown to hold does not hold.

use std::sync::{Arc, LazyLock};
use std::time::SystemTime;

use cel::{Context, Env, ExecutionError, Program};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Privilege, SideEffects};

/// The variables an expression may name; anything else is refused at load.
const VARIABLES: [&str; 4] = ["args", "caller", "tool", "now"];

/// CEL's standard environment, built once and shared by every evaluation (building it per call
/// would cost a function table each time).
static STDLIB: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// One precondition as written in a contract.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhenFields {
    /// A CEL expression that must be true for the call to go ahead. It can read `args` (the
    /// call's arguments, after they validated against `input`), `caller` (`name`, `roles`,
    /// `scopes`), `tool` (`name`, `privilege`, `side_effects`) and `now` (a timestamp). One
    /// that is false, or that cannot be evaluated (a missing key, a type error), denies the call.
    pub expr: String,
    /// The tool error a caller gets when the expression is false (say what would allow it).
    pub message: String,
}

/// A compiled precondition.
#[derive(Debug)]
pub struct Precondition {
    /// Its position under `when` (from 0), as receipts and logs name it.
    pub index: usize,
    pub expr: String,
    pub message: String,
    program: Program,
}

/// The caller as preconditions see it.
pub struct Subject<'a> {
    pub name: &'a str,
    pub roles: &'a [String],
    pub scopes: &'a [String],
}

/// Why a call was denied by a precondition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The precondition's index under `when`.
    pub index: usize,
    /// What the caller is told (the precondition's `message`, or that it could not be evaluated).
    pub message: String,
    /// The expression evaluated to false (rather than failing to evaluate).
    pub was_false: bool,
}

/// Compiles `when` entries; errors carry the key suffix below the tool (`.when.N.expr`) and a
/// message.
pub fn compile(fields: Vec<WhenFields>) -> Result<Vec<Precondition>, (String, String)> {
    fields
        .into_iter()
        .enumerate()
        .map(|(index, f)| {
            let at = format!(".when.{index}.expr");
            let program = STDLIB.compile(&f.expr).map_err(|e| {
                (
                    at.clone(),
                    format!("`{}` is not a valid CEL expression: {e}", f.expr),
                )
            })?;
            let references = program.references();
            if let Some(unknown) = references
                .variables()
                .into_iter()
                .find(|v| !VARIABLES.contains(v))
            {
                return Err((
                    at,
                    format!(
                        "`{}` names `{unknown}`; an expression can read only {}",
                        f.expr,
                        VARIABLES.join(", ")
                    ),
                ));
            }
            Ok(Precondition {
                index,
                expr: f.expr,
                message: f.message,
                program,
            })
        })
        .collect()
}

/// The tool as preconditions see it.
pub struct ToolFacts<'a> {
    pub name: &'a str,
    pub privilege: Privilege,
    pub side_effects: SideEffects,
}

/// Evaluates `preconditions` in order; the first that is false or cannot be evaluated denies.
pub fn evaluate(
    preconditions: &[Precondition],
    args: &Value,
    caller: &Subject<'_>,
    tool: &ToolFacts<'_>,
    now: SystemTime,
) -> Result<(), Denial> {
    let Some(first) = preconditions.first() else {
        return Ok(());
    };
    let context = match context(args, caller, tool, now) {
        Ok(context) => context,
        Err(why) => {
            tracing::warn!(precondition = first.index, error = %why, "preconditions could not be evaluated");
            return Err(unevaluable(first.index));
        }
    };
    for p in preconditions {
        match p.program.execute(&context) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => {
                return Err(Denial {
                    index: p.index,
                    message: p.message.clone(),
                    was_false: true,
                });
            }
            Ok(other) => {
                tracing::warn!(
                    precondition = p.index,
                    expr = %p.expr,
                    result = ?other.type_of(),
                    "a precondition did not evaluate to a boolean; the call is denied"
                );
                return Err(unevaluable(p.index));
            }
            Err(e) => {
                tracing::warn!(
                    precondition = p.index,
                    expr = %p.expr,
                    error = %kind_of(&e),
                    "a precondition could not be evaluated; the call is denied"
                );
                return Err(unevaluable(p.index));
            }
        }
    }
    Ok(())
}

/// The denial of a precondition that could not be evaluated. It says nothing of the arguments.
fn unevaluable(index: usize) -> Denial {
    Denial {
        index,
        message: format!(
            "precondition {index} of this tool could not be evaluated, so the call is denied"
        ),
        was_false: false,
    }
}

/// What went wrong, without the values involved (they may be arguments, which logs never show
/// unredacted): key and function names and types only.
fn kind_of(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(key) => format!("no such key `{key}`"),
        ExecutionError::UndeclaredReference(name) => format!("undeclared reference `{name}`"),
        ExecutionError::UnexpectedType { got, want } => {
            format!("unexpected type: got {got}, want {want}")
        }
        ExecutionError::NoSuchOverload(o) => {
            format!("no overload of `{}` for these types", o.function())
        }
        ExecutionError::ValuesNotComparable(a, b) => {
            format!("{:?} cannot be compared to {:?}", a.type_of(), b.type_of())
        }
        ExecutionError::FunctionError { function, .. } => format!("`{function}` failed"),
        _ => "an evaluation error".into(),
    }
}

/// The variables of one evaluation.
fn context<'a>(
    args: &Value,
    caller: &Subject<'_>,
    tool: &ToolFacts<'_>,
    now: SystemTime,
) -> Result<Context<'a, 'a>, cel::SerializationError> {
    let mut context = Context::with_env(STDLIB.clone());
    context.add_variable("args", args)?;
    context.add_variable(
        "caller",
        serde_json::json!({"name": caller.name, "roles": caller.roles, "scopes": caller.scopes}),
    )?;
    context.add_variable(
        "tool",
        serde_json::json!({
            "name": tool.name,
            "privilege": tool.privilege,
            "side_effects": tool.side_effects,
        }),
    )?;
    let now: chrono::DateTime<chrono::Utc> = now.into();
    context.add_variable_from_value("now", cel::Value::Timestamp(now.fixed_offset()));
    Ok(context)
}

/// What `check` says of a tool's preconditions: each argument an expression reads that the
/// input schema does not declare (a misspelt name makes the expression fail to evaluate, so every
/// call would be denied, or tests a key that is never there).
pub fn warnings(tool: &str, preconditions: &[Precondition], input: &Value) -> Vec<String> {
    let declared = input.get("properties").and_then(Value::as_object);
    let mut warnings = Vec::new();
    for p in preconditions {
        for name in argument_names(&p.expr) {
            if !declared.is_some_and(|d| d.contains_key(&name)) {
                warnings.push(format!(
                    "tool `{tool}`: `when` {} reads `args.{name}`, which its `input` does not declare: \
                     a call cannot send it, so the expression fails (and denies) or tests nothing",
                    p.index
                ));
            }
        }
    }
    warnings
}

/// The argument names (`args.NAME`, `has(args.NAME)`, `args['NAME']`) an expression reads at
/// the top level of `args`, for `check` to compare with the input schema.
pub fn argument_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = expr.as_bytes();
    let mut from = 0;
    while let Some(at) = expr[from..].find("args") {
        let start = from + at;
        from = start + 4;
        // `args` as a whole word.
        if start > 0 && is_ident(bytes[start - 1]) {
            continue;
        }
        let rest = &expr[from..];
        let name: String = if let Some(field) = rest.strip_prefix('.') {
            field.chars().take_while(|c| is_ident_char(*c)).collect()
        } else if let Some(index) = rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\"")) {
            index
                .chars()
                .take_while(|c| *c != '\'' && *c != '"')
                .collect()
        } else {
            continue;
        };
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compiled(exprs: &[&str]) -> Vec<Precondition> {
        compile(
            exprs
                .iter()
                .map(|e| WhenFields {
                    expr: (*e).into(),
                    message: format!("no: {e}"),
                })
                .collect(),
        )
        .expect("compiles")
    }

    fn run(exprs: &[&str], args: Value, roles: &[&str]) -> Result<(), Denial> {
        let roles: Vec<String> = roles.iter().map(|r| (*r).to_string()).collect();
        let scopes = vec!["orders:write".to_string()];
        evaluate(
            &compiled(exprs),
            &args,
            &Subject {
                name: "alice",
                roles: &roles,
                scopes: &scopes,
            },
            &ToolFacts {
                name: "refund",
                privilege: Privilege::Write,
                side_effects: SideEffects::Irreversible,
            },
            SystemTime::now(),
        )
    }

    /// Proves: an expression over args and caller holds or denies with its message and index,
    /// and every variable (caller, tool, now) is there with the documented fields.
    #[test]
    fn true_passes_false_denies_with_its_message() {
        let rule = "args.amount <= 500.0 || 'finance' in caller.roles";
        assert_eq!(run(&[rule], json!({"amount": 100.0}), &[]), Ok(()));
        assert_eq!(run(&[rule], json!({"amount": 900.0}), &["finance"]), Ok(()));
        let denied = run(&["true", rule], json!({"amount": 900.0}), &["staff"]).unwrap_err();
        assert_eq!(
            denied,
            Denial {
                index: 1,
                message: format!("no: {rule}"),
                was_false: true
            }
        );
        let facts = "caller.name == 'alice' && 'orders:write' in caller.scopes \
            && tool.name == 'refund' && tool.privilege == 'write' \
            && tool.side_effects == 'irreversible' && now > timestamp('2020-01-01T00:00:00Z')";
        assert_eq!(run(&[facts], json!({}), &[]), Ok(()));
    }

    /// Proves: a type error, a missing key and a non-boolean result deny (fail closed) with a
    /// message that says so and does not echo the arguments.
    #[test]
    fn an_expression_that_cannot_be_evaluated_denies() {
        for expr in ["args.amount > 'x'", "args.missing == 1", "args.amount"] {
            let denied = run(&[expr], json!({"amount": 12345.0}), &[]).unwrap_err();
            assert!(!denied.was_false, "{expr}");
            assert!(
                denied.message.contains("could not be evaluated")
                    && !denied.message.contains("12345"),
                "{expr}: {}",
                denied.message
            );
        }
    }

    /// Proves: whole JSON numbers are CEL ints, compared freely with doubles; arithmetic mixing
    /// them needs `double()` (as docs/contracts.md says), else the call is denied.
    #[test]
    fn numbers_compare_across_types_and_add_with_double() {
        let args = json!({"a": 3, "b": 4.5});
        assert_eq!(
            run(&["args.a <= 100.0 && args.b > 4"], args.clone(), &[]),
            Ok(())
        );
        assert_eq!(
            run(
                &["double(args.a) + double(args.b) <= 100.0"],
                args.clone(),
                &[]
            ),
            Ok(())
        );
        assert!(
            !run(&["args.a + args.b <= 100.0"], args, &[])
                .unwrap_err()
                .was_false
        );
    }

    /// Proves: an expression that does not parse, or names an unknown variable, is refused at
    /// compile time with the key of the entry.
    #[test]
    fn bad_expressions_do_not_compile() {
        for (expr, says) in [("args.amount <=", "not a valid CEL"), ("user.x", "`user`")] {
            let e = compile(vec![
                WhenFields {
                    expr: "true".into(),
                    message: "m".into(),
                },
                WhenFields {
                    expr: expr.into(),
                    message: "m".into(),
                },
            ])
            .unwrap_err();
            assert_eq!(e.0, ".when.1.expr");
            assert!(e.1.contains(says), "{}", e.1);
        }
    }

    /// Proves: `check` warns for an argument the input schema lacks, and only for it.
    #[test]
    fn undeclared_arguments_are_warned_about() {
        let input = json!({"type": "object", "properties": {"amount": {"type": "number"}}});
        let w = warnings(
            "refund",
            &compiled(&["args.amount < 5.0", "args.ammount < 5.0"]),
            &input,
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("`when` 1") && w[0].contains("args.ammount"),
            "{}",
            w[0]
        );
    }

    /// Measures what two preconditions cost per call (build the variables, evaluate both).
    #[test]
    #[ignore = "a measurement, not a check"]
    fn cost_per_call() {
        let rule = "args.amount <= 500.0 || 'finance' in caller.roles";
        let exprs = [
            rule,
            "tool.side_effects == 'irreversible' && has(args.order)",
        ];
        let n = 20_000;
        let started = std::time::Instant::now();
        for _ in 0..n {
            let r = run(&exprs, json!({"amount": 100.0, "order": "o-1"}), &["staff"]);
            assert_eq!(r, Ok(()));
        }
        eprintln!(
            "{:.1} µs per call (compiling included)",
            started.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        );
        let compiled = compiled(&exprs);
        let (roles, scopes) = (vec!["staff".to_string()], vec![]);
        let args = json!({"amount": 100.0, "order": "o-1"});
        let started = std::time::Instant::now();
        for _ in 0..n {
            let subject = Subject {
                name: "alice",
                roles: &roles,
                scopes: &scopes,
            };
            let tool = ToolFacts {
                name: "refund",
                privilege: Privilege::Write,
                side_effects: SideEffects::Irreversible,
            };
            assert_eq!(
                evaluate(&compiled, &args, &subject, &tool, SystemTime::now()),
                Ok(())
            );
        }
        eprintln!(
            "{:.1} µs per call (evaluation only)",
            started.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        );
    }

    /// Proves: the argument names an expression reads are found in its usual spellings.
    #[test]
    fn argument_names_are_found() {
        assert_eq!(
            argument_names("args.amount <= 5 && has(args.note) || args['x'] == 1 && myargs.y"),
            vec!["amount", "note", "x"]
        );
    }
}
