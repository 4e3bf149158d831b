//! Typed failures (docs/semantics.md, "Typed errors"): every refusal and failure a `tools/call`
//! answers carries `structuredContent: {"error": {"type", "message", "retry_after_ms"?,
//! "retryable"?}}` beside its text, so a program tells "rate limited, retry in 2 s" from "not
//! found" from "effect unknown, do not retry" without reading English. The text stays for models
//! and for clients that read only text.

use rmcp::model::{CallToolResult, ContentBlock, ErrorData, MetaObject, ProtocolVersion};
use serde_json::{Map, Value, json};

use crate::contract::errors::{ErrorRules, ErrorType};
use crate::policy::limits::{RETRY_AFTER_META, Refusal};
use crate::receipts::Outcome;

/// One refusal or failure, as the client is told of it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub error_type: ErrorType,
    pub message: String,
    /// When a retry may succeed, if the gateway knows (a rate limit's wait).
    pub retry_after_ms: Option<u64>,
    /// Whether the same call may succeed if sent again unchanged, when that is known.
    pub retryable: Option<bool>,
}

impl Failure {
    pub fn new(error_type: ErrorType, message: impl Into<String>) -> Failure {
        Failure {
            retryable: error_type.retryable(),
            error_type,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// A rate limit's refusal: `rate_limited` with its wait, or `unavailable` when the shared
    /// limiter state cannot be reached.
    pub fn of_refusal(refusal: &Refusal) -> Failure {
        let error_type = match refusal {
            Refusal::Exceeded { .. } => ErrorType::RateLimited,
            Refusal::Unavailable(_) => ErrorType::Unavailable,
        };
        Failure {
            retry_after_ms: refusal.retry_after_ms(),
            ..Failure::new(error_type, refusal.message())
        }
    }

    /// `{"error": {...}}`: the `structuredContent` of the tool error.
    pub fn object(&self) -> Value {
        let mut error = Map::new();
        error.insert("type".into(), self.error_type.as_str().into());
        error.insert("message".into(), self.message.clone().into());
        if let Some(ms) = self.retry_after_ms {
            error.insert("retry_after_ms".into(), ms.into());
        }
        if let Some(retryable) = self.retryable {
            error.insert("retryable".into(), retryable.into());
        }
        json!({ "error": error })
    }

    /// The tool error the client gets. A known wait is also in
    /// `_meta: {"narrowgate/retryAfterMs": N}`, where earlier releases put it.
    pub fn into_result(self) -> CallToolResult {
        let mut result = CallToolResult::error(vec![ContentBlock::text(self.message.clone())]);
        if let Some(ms) = self.retry_after_ms {
            let mut meta = Map::new();
            meta.insert(RETRY_AFTER_META.into(), ms.into());
            result.meta = Some(MetaObject(meta));
        }
        result.structured_content = Some(self.object());
        result
    }
}

/// Out-of-contract arguments: a typed tool error from 2025-11-25 on (so models can correct
/// themselves), JSON-RPC -32602 for older protocol revisions, with the error object as its `data`.
pub fn rejected_input(
    message: String,
    protocol: Option<&ProtocolVersion>,
) -> Result<CallToolResult, ErrorData> {
    let failure = Failure::new(ErrorType::InvalidArguments, message);
    match protocol {
        Some(v) if *v >= ProtocolVersion::V_2025_11_25 => Ok(failure.into_result()),
        _ => Err(ErrorData::invalid_params(
            failure.message.clone(),
            Some(failure.object()),
        )),
    }
}

/// JSON-RPC -32602 `Unknown tool: NAME`, exactly as MCP servers answer it (its receipt records
/// `denied`). A name no tool can have (outside `^[A-Za-z0-9_-]{1,64}$`) is echoed escaped and cut
/// short, never as sent.
pub fn unknown_tool(name: &str) -> ErrorData {
    let name = crate::policy::names::shown_tool(name);
    ErrorData::invalid_params(format!("Unknown tool: {name}"), None)
}

/// Types an upstream's tool error by the contract's `errors:` rules (the first whose pattern
/// matches its text), else `upstream_error`. Whatever structured content the upstream sent with
/// its error is replaced: the error object is the only shape an error result has.
pub fn type_upstream_error(result: &mut CallToolResult, rules: &ErrorRules) -> ErrorType {
    let text = text_of(result);
    let (error_type, retryable) = match rules.classify(&text) {
        Some(rule) => (rule.error_type.clone(), rule.retry),
        None => (ErrorType::UpstreamError, None),
    };
    let failure = Failure {
        error_type: error_type.clone(),
        message: text,
        retry_after_ms: None,
        retryable,
    };
    result.structured_content = Some(failure.object());
    error_type
}

/// Gives a tool error that carries no error object one, typed by its outcome: the refusals the
/// dedupe records answer (a reused key, no room, an identical call's unknown effect). A result
/// that already has one, or is not an error, is left alone.
pub fn ensure_typed(result: &mut CallToolResult, outcome: Outcome) {
    if result.is_error != Some(true) || type_of(result).is_some() {
        return;
    }
    let error_type = match outcome {
        Outcome::RejectedInput => ErrorType::InvalidArguments,
        Outcome::Denied => ErrorType::Denied,
        Outcome::RateLimited => ErrorType::RateLimited,
        Outcome::Timeout => ErrorType::Timeout,
        Outcome::Unknown => ErrorType::UnknownOutcome,
        Outcome::RejectedOutput => ErrorType::InvalidResult,
        // A refusal before running (the shared records unreachable) says nothing ran.
        Outcome::UpstreamError => ErrorType::Unavailable,
        Outcome::Ok | Outcome::ToolError => ErrorType::UpstreamError,
    };
    result.structured_content = Some(Failure::new(error_type, text_of(result)).object());
}

/// The error type an answer carries, for the receipt and the span.
pub fn type_of(result: &CallToolResult) -> Option<&str> {
    type_in(result.structured_content.as_ref()?)
}

/// The error type of a JSON-RPC error's `data`, when the gateway typed it.
pub fn type_of_protocol_error(error: &ErrorData) -> Option<&str> {
    type_in(error.data.as_ref()?)
}

fn type_in(value: &Value) -> Option<&str> {
    value.get("error")?.get("type")?.as_str()
}

/// The text blocks of a result, joined: what a tool error says.
fn text_of(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.as_str()))
        .collect();
    texts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Proves: a rate limit's refusal is typed `rate_limited`, retryable, with its wait both in
    /// the error object and in the `_meta` key earlier releases used.
    #[test]
    fn a_rate_limit_refusal_carries_its_wait() {
        let refusal = Refusal::Exceeded {
            limit: "caller `a` may make 1/s calls".into(),
            retry_after: Duration::from_millis(1500),
        };
        let result = Failure::of_refusal(&refusal).into_result();
        assert_eq!(result.is_error, Some(true));
        let error = &result.structured_content.as_ref().expect("typed")["error"];
        assert_eq!(error["type"], "rate_limited");
        assert_eq!(error["retry_after_ms"], 1500);
        assert_eq!(error["retryable"], true);
        let meta = result.meta.expect("meta");
        assert_eq!(meta.0[RETRY_AFTER_META], 1500);
        let unavailable = Failure::of_refusal(&Refusal::Unavailable("redis down".into()));
        assert_eq!(unavailable.error_type, ErrorType::Unavailable);
        assert_eq!(unavailable.retry_after_ms, None);
    }

    /// Proves: out-of-contract arguments are a typed tool error on 2025-11-25, and a JSON-RPC
    /// -32602 carrying the same error object on older revisions.
    #[test]
    fn rejected_input_is_typed_on_every_revision() {
        let new = rejected_input("bad".into(), Some(&ProtocolVersion::V_2025_11_25)).expect("ok");
        assert_eq!(type_of(&new), Some("invalid_arguments"));
        let old = rejected_input("bad".into(), Some(&ProtocolVersion::V_2025_06_18))
            .expect_err("protocol error");
        assert_eq!(old.code.0, -32602);
        assert_eq!(type_of_protocol_error(&old), Some("invalid_arguments"));
    }

    /// Proves: an upstream tool error is typed by the first matching rule, unmatched ones are
    /// `upstream_error`, and the upstream's own structured content never survives.
    #[test]
    fn upstream_errors_are_typed_by_the_contract() {
        let fields = serde_saphyr::from_str(
            "not_found: {match: '(?i)no such', retry: false}\nconflict: {match: '409'}",
        )
        .expect("yaml");
        let rules = ErrorRules::build(fields).expect("rules");
        let mut result = CallToolResult::error(vec![ContentBlock::text("ENOENT: No such file")]);
        result.structured_content = Some(json!({"secret": 1}));
        let t = type_upstream_error(&mut result, &rules);
        assert_eq!(t.as_str(), "not_found");
        let error = &result.structured_content.as_ref().expect("typed")["error"];
        assert_eq!(error["message"], "ENOENT: No such file");
        assert_eq!(error["retryable"], false);
        assert!(
            result
                .structured_content
                .as_ref()
                .expect("typed")
                .get("secret")
                .is_none()
        );
        let mut other = CallToolResult::error(vec![ContentBlock::text("disk on fire")]);
        assert_eq!(
            type_upstream_error(&mut other, &rules),
            ErrorType::UpstreamError
        );
    }

    /// Proves: an untyped tool error (a dedupe record's refusal) gets the type its outcome
    /// implies, and a typed one or a success is left as it is.
    #[test]
    fn untyped_errors_are_typed_by_their_outcome() {
        let mut reused = CallToolResult::error(vec![ContentBlock::text("key reused")]);
        ensure_typed(&mut reused, Outcome::RejectedInput);
        assert_eq!(type_of(&reused), Some("invalid_arguments"));
        let mut typed = Failure::new(ErrorType::Timeout, "slow").into_result();
        ensure_typed(&mut typed, Outcome::Unknown);
        assert_eq!(type_of(&typed), Some("timeout"));
        let mut ok = CallToolResult::success(vec![ContentBlock::text("fine")]);
        ensure_typed(&mut ok, Outcome::Ok);
        assert!(ok.structured_content.is_none());
    }
}
