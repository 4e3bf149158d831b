//! Enforcing a contract at call time (SPEC §4.3, §4.5): arguments are checked before anything is
//! sent upstream, results before anything is returned. Both checks only ever describe a failure by
//! path and rule: the rejected data itself never appears in a message.

use jsonschema::Validator;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use super::schema::{Violation, first_violation};

/// Which schema rejected the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentRejection {
    Contract(Violation),
    Upstream(Violation),
}

impl std::fmt::Display for ArgumentRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgumentRejection::Contract(v) => write!(f, "arguments rejected by the contract: {v}"),
            // Only path and rule: the detail would quote the upstream's schema (its enum values,
            // say), which the contract may deliberately not publish.
            ArgumentRejection::Upstream(v) => write!(
                f,
                "arguments rejected by the upstream tool's schema: at {} violates `{}`",
                v.path, v.rule
            ),
        }
    }
}

/// Checks `arguments` against the contract's and then the upstream's input schema.
pub fn check_arguments(
    contract: &Validator,
    upstream: Option<&Validator>,
    arguments: &Value,
) -> Result<(), ArgumentRejection> {
    if let Some(v) = first_violation(contract, arguments) {
        return Err(ArgumentRejection::Contract(v));
    }
    if let Some(v) = upstream.and_then(|u| first_violation(u, arguments)) {
        return Err(ArgumentRejection::Upstream(v));
    }
    Ok(())
}

/// Why a result was not passed to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultRejection {
    TooLarge { limit: usize },
    MissingStructuredContent,
    Contract(Violation),
    Upstream(Violation),
}

impl std::fmt::Display for ResultRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResultRejection::TooLarge { limit } => {
                write!(f, "the upstream result exceeds max_result_bytes ({limit} bytes)")
            }
            ResultRejection::MissingStructuredContent => f.write_str(
                "the upstream result has no structuredContent (nor a single JSON text block) although the contract declares an output schema",
            ),
            ResultRejection::Contract(v) => write!(f, "result rejected by the contract's output schema: {v}"),
            ResultRejection::Upstream(v) => {
                write!(f, "result rejected by the upstream tool's own outputSchema: {v}")
            }
        }
    }
}

/// The output schemas that apply to a tool's results.
pub struct OutputSchemas<'a> {
    pub contract: Option<&'a Validator>,
    pub upstream: Option<&'a Validator>,
    pub max_bytes: usize,
}

/// Checks an upstream result. With a contract output schema, the structured result (lifted from a
/// lone JSON text block when needed) must satisfy both output schemas, and the returned content is
/// rebuilt from it alone, so nothing outside the contract reaches the client. Upstream tool errors
/// pass through, bounded in size.
pub fn check_result(
    mut result: CallToolResult,
    schemas: &OutputSchemas<'_>,
) -> Result<CallToolResult, ResultRejection> {
    // The upstream's `_meta` is upstream data outside any contract: it is never passed on.
    result.meta = None;
    if encoded_len(&result) > schemas.max_bytes {
        return Err(ResultRejection::TooLarge {
            limit: schemas.max_bytes,
        });
    }
    if result.is_error == Some(true) {
        return Ok(result);
    }
    let Some(contract) = schemas.contract else {
        return Ok(result);
    };
    let structured = match result.structured_content {
        Some(value) => value,
        None => lift_text_json(&result.content).ok_or(ResultRejection::MissingStructuredContent)?,
    };
    if let Some(v) = first_violation(contract, &structured) {
        return Err(ResultRejection::Contract(v));
    }
    if let Some(v) = schemas
        .upstream
        .and_then(|u| first_violation(u, &structured))
    {
        return Err(ResultRejection::Upstream(v));
    }
    let text = serde_json::to_string(&structured).unwrap_or_default();
    let mut checked = CallToolResult::success(vec![ContentBlock::text(text)]);
    checked.structured_content = Some(structured);
    Ok(checked)
}

/// The JSON held by a result made of exactly one text block, if it is JSON.
fn lift_text_json(content: &[ContentBlock]) -> Option<Value> {
    match content {
        [only] => only
            .as_text()
            .and_then(|t| serde_json::from_str::<Value>(&t.text).ok()),
        _ => None,
    }
}

/// The size of `result` as JSON, counted while serialising it, without keeping the bytes.
fn encoded_len(result: &CallToolResult) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, result) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::schema::compile;
    use serde_json::json;

    fn weather_output() -> std::sync::Arc<Validator> {
        compile(&json!({
            "type": "object",
            "properties": {"temperature": {"type": "number", "maximum": 60}},
            "required": ["temperature"]
        }))
        .expect("compiles")
    }

    fn schemas(v: &Validator) -> OutputSchemas<'_> {
        OutputSchemas {
            contract: Some(v),
            upstream: None,
            max_bytes: 10_000,
        }
    }

    #[test]
    fn a_conforming_result_keeps_only_its_structured_content() {
        let v = weather_output();
        let mut r = CallToolResult::success(vec![
            ContentBlock::text("{\"temperature\": 20}"),
            ContentBlock::text("EXTRA-UNCHECKED"),
        ]);
        r.structured_content = Some(json!({"temperature": 20}));
        let checked = check_result(r, &schemas(&v)).expect("conforms");
        assert_eq!(checked.structured_content, Some(json!({"temperature": 20})));
        let text = serde_json::to_string(&checked.content).expect("json");
        assert!(!text.contains("EXTRA-UNCHECKED"), "{text}");
    }

    #[test]
    fn a_single_json_text_block_is_lifted_into_structured_content() {
        let v = weather_output();
        let r = CallToolResult::success(vec![ContentBlock::text("{\"temperature\": 21}")]);
        let checked = check_result(r, &schemas(&v)).expect("lifted");
        assert_eq!(checked.structured_content, Some(json!({"temperature": 21})));
    }

    #[test]
    fn violations_and_missing_structure_are_rejected_without_data() {
        let v = weather_output();
        let mut r = CallToolResult::success(vec![ContentBlock::text("SECRET")]);
        r.structured_content = Some(json!({"temperature": 999}));
        let e = check_result(r, &schemas(&v)).unwrap_err();
        assert!(
            matches!(&e, ResultRejection::Contract(v) if v.path == "/temperature" && v.rule == "maximum")
        );
        assert!(
            !e.to_string().contains("999") && !e.to_string().contains("SECRET"),
            "{e}"
        );
        let r = CallToolResult::success(vec![ContentBlock::text("not json")]);
        assert_eq!(
            check_result(r, &schemas(&v)).unwrap_err(),
            ResultRejection::MissingStructuredContent
        );
    }

    #[test]
    fn oversized_results_are_rejected_even_when_they_are_errors() {
        let v = weather_output();
        let r = CallToolResult::error(vec![ContentBlock::text("x".repeat(20_000))]);
        assert_eq!(
            check_result(r, &schemas(&v)).unwrap_err(),
            ResultRejection::TooLarge { limit: 10_000 }
        );
        let r = CallToolResult::error(vec![ContentBlock::text("small failure")]);
        assert_eq!(
            check_result(r, &schemas(&v)).expect("passes").is_error,
            Some(true)
        );
    }

    #[test]
    fn arguments_must_satisfy_both_schemas() {
        let contract =
            compile(&json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
                .expect("c");
        let upstream =
            compile(&json!({"type": "object", "properties": {"n": {"maximum": 10}}})).expect("u");
        assert!(check_arguments(&contract, Some(&upstream), &json!({"n": 5})).is_ok());
        assert!(matches!(
            check_arguments(&contract, Some(&upstream), &json!({"n": 50})),
            Err(ArgumentRejection::Upstream(_))
        ));
        assert!(matches!(
            check_arguments(&contract, Some(&upstream), &json!({"n": "x"})),
            Err(ArgumentRejection::Contract(_))
        ));
    }
}
