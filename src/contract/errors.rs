//! The failures a tool can answer, as types a program can handle: the gateway's own, the ones a
//! contract declares for the upstream's tool errors (`errors:`), what to do instead of failing
//! (`on_error:`), and the schema of the error object every typed failure carries.
//!
//! Without types a program cannot tell "rate limited, retry in 2 s" from "not found" from
//! "effect unknown, do not retry" without parsing English; with them it branches on one string.

use std::sync::Arc;

use regex::Regex;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The `_meta` key of a published tool listing the error types it can answer.
pub const ERRORS_META: &str = "narrowgate/errors";

/// One kind of failure: the gateway's own, or one a contract declares under `errors:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorType {
    /// The arguments are outside the contract or the upstream's schema; nothing was sent.
    InvalidArguments,
    /// A rule refused the call (a precondition, a missing scope); nothing was sent.
    Denied,
    /// The user or an approver said no; nothing was sent.
    ApprovalDenied,
    /// Nobody decided in time; nothing was sent.
    ApprovalTimeout,
    /// A rate limit refused the call; `retry_after_ms` says when to try again.
    RateLimited,
    /// The upstream (or the gateway's shared state) cannot be reached; nothing was sent.
    Unavailable,
    /// An idempotent call did not complete in time (safe to retry).
    Timeout,
    /// A call that may have taken effect got no valid answer: check before retrying.
    UnknownOutcome,
    /// The upstream's result is outside the contract; none of it was returned.
    InvalidResult,
    /// The caller's own credential for the upstream is missing or expired.
    CredentialUnavailable,
    /// The upstream failed, or answered with a tool error no `errors:` rule matched.
    UpstreamError,
    /// A type the contract declares (`errors: {not_found: …}`).
    Declared(Arc<str>),
}

/// The gateway's own types, in the order a tool's list publishes them.
pub const BUILTIN: [ErrorType; 11] = [
    ErrorType::InvalidArguments,
    ErrorType::Denied,
    ErrorType::ApprovalDenied,
    ErrorType::ApprovalTimeout,
    ErrorType::RateLimited,
    ErrorType::Unavailable,
    ErrorType::Timeout,
    ErrorType::UnknownOutcome,
    ErrorType::InvalidResult,
    ErrorType::CredentialUnavailable,
    ErrorType::UpstreamError,
];

impl ErrorType {
    pub fn as_str(&self) -> &str {
        match self {
            ErrorType::InvalidArguments => "invalid_arguments",
            ErrorType::Denied => "denied",
            ErrorType::ApprovalDenied => "approval_denied",
            ErrorType::ApprovalTimeout => "approval_timeout",
            ErrorType::RateLimited => "rate_limited",
            ErrorType::Unavailable => "unavailable",
            ErrorType::Timeout => "timeout",
            ErrorType::UnknownOutcome => "unknown_outcome",
            ErrorType::InvalidResult => "invalid_result",
            ErrorType::CredentialUnavailable => "credential_unavailable",
            ErrorType::UpstreamError => "upstream_error",
            ErrorType::Declared(name) => name,
        }
    }

    /// Whether the same call may succeed if sent again unchanged, when that is known.
    pub fn retryable(&self) -> Option<bool> {
        match self {
            ErrorType::RateLimited
            | ErrorType::Unavailable
            | ErrorType::Timeout
            | ErrorType::ApprovalTimeout => Some(true),
            ErrorType::InvalidArguments
            | ErrorType::Denied
            | ErrorType::ApprovalDenied
            | ErrorType::UnknownOutcome
            | ErrorType::InvalidResult => Some(false),
            _ => None,
        }
    }
}

impl std::fmt::Display for ErrorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `name` is one of the gateway's own types.
pub fn is_builtin(name: &str) -> bool {
    BUILTIN.iter().any(|t| t.as_str() == name)
}

/// `errors:` as written: declared types in file order (the first whose `match` finds the
/// upstream's error text wins).
#[derive(Debug, Default)]
pub struct ErrorsFields(Vec<(String, ErrorFields)>);

/// One declared type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorFields {
    /// A regular expression (Rust `regex` syntax; `(?i)` for any case) searched in the text of
    /// the upstream's tool error.
    #[serde(rename = "match")]
    pub pattern: String,
    /// Whether the same call may succeed if sent again (published as `retryable` in the error
    /// object); unset: not said.
    pub retry: Option<bool>,
}

impl<'de> Deserialize<'de> for ErrorsFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> serde::de::Visitor<'de> for InOrder {
            type Value = ErrorsFields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a mapping of error type names to `{match, retry}`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<ErrorsFields, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, ErrorFields>()? {
                    entries.push(entry);
                }
                Ok(ErrorsFields(entries))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

impl JsonSchema for ErrorsFields {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorsFields".into()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let entry = generator.subschema_for::<ErrorFields>();
        schemars::json_schema!({
            "type": "object",
            "propertyNames": {"pattern": DECLARED_NAME},
            "additionalProperties": entry,
        })
    }
}

/// What a declared type's name must look like: lower snake case, like the gateway's own.
const DECLARED_NAME: &str = "^[a-z][a-z0-9_]{0,63}$";

/// One compiled `errors:` entry.
#[derive(Debug)]
pub struct ErrorRule {
    pub error_type: ErrorType,
    pub pattern: Regex,
    pub retry: Option<bool>,
}

/// A tool's `errors:`, compiled, in order.
#[derive(Debug, Default)]
pub struct ErrorRules(Vec<ErrorRule>);

impl ErrorRules {
    /// Checks names and compiles patterns. Errors carry a key suffix and a message.
    pub fn build(fields: ErrorsFields) -> Result<ErrorRules, (String, String)> {
        let mut rules = Vec::with_capacity(fields.0.len());
        for (name, entry) in fields.0 {
            let at = format!(".errors.{name}");
            if is_builtin(&name) {
                return Err((
                    at,
                    format!(
                        "`{name}` is one of the gateway's own error types; declare a name of your own"
                    ),
                ));
            }
            let valid = name.len() <= 64
                && name.starts_with(|c: char| c.is_ascii_lowercase())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !valid {
                return Err((
                    at,
                    "an error type name must match ^[a-z][a-z0-9_]{0,63}$".into(),
                ));
            }
            // Bounded like the schemas' patterns: an operator's regex, compiled once.
            let pattern = regex::RegexBuilder::new(&entry.pattern)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| (format!("{at}.match"), format!("not a valid regex: {e}")))?;
            rules.push(ErrorRule {
                error_type: ErrorType::Declared(name.into()),
                pattern,
                retry: entry.retry,
            });
        }
        Ok(ErrorRules(rules))
    }

    /// The first rule whose pattern is found in `text`.
    pub fn classify(&self, text: &str) -> Option<&ErrorRule> {
        self.0.iter().find(|r| r.pattern.is_match(text))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn types(&self) -> impl Iterator<Item = &ErrorType> {
        self.0.iter().map(|r| &r.error_type)
    }

    /// The rules as written, for the contract's digest.
    pub fn written(&self) -> Value {
        let rules: Vec<Value> = self
            .0
            .iter()
            .map(|r| json!([r.error_type.as_str(), r.pattern.as_str(), r.retry]))
            .collect();
        Value::Array(rules)
    }
}

/// `on_error:` as written.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OnErrorFields {
    /// The error types it applies to (the gateway's own, or this tool's `errors:`).
    pub types: Vec<String>,
    /// A read tool taking the same arguments, called instead (through its own contract and the
    /// caller's allowlist).
    pub fallback: Option<String>,
    /// A text answered instead of the failure.
    pub degrade: Option<String>,
}

/// What answers instead of a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// Call this tool (same arguments) instead.
    Fallback(String),
    /// Answer this text instead.
    Degrade(String),
}

/// A tool's `on_error:`, checked.
#[derive(Debug, Clone)]
pub struct OnError {
    pub types: Vec<String>,
    pub recovery: Recovery,
}

impl OnError {
    /// Checks `fields` against the tool's declared types. `read_only`: fallbacks are for read
    /// tools only (a write's failure may have taken effect; a second tool would do it again).
    pub fn build(
        fields: OnErrorFields,
        rules: &ErrorRules,
        read_only: bool,
    ) -> Result<OnError, (String, String)> {
        let at = |sub: &str| format!(".on_error{sub}");
        if fields.types.is_empty() {
            return Err((at(".types"), "name at least one error type".into()));
        }
        for (i, name) in fields.types.iter().enumerate() {
            if !is_builtin(name) && !rules.types().any(|t| t.as_str() == name) {
                return Err((
                    at(&format!(".types.{i}")),
                    format!(
                        "`{name}` is neither one of the gateway's error types nor declared under this tool's `errors:`"
                    ),
                ));
            }
        }
        let recovery = match (fields.fallback, fields.degrade) {
            (Some(tool), None) if read_only => Recovery::Fallback(tool),
            (Some(_), None) => {
                return Err((
                    at(".fallback"),
                    "a fallback is for read tools only: a failed write may have taken effect, and another tool would do it again".into(),
                ));
            }
            (None, Some(text)) => Recovery::Degrade(text),
            _ => {
                return Err((
                    at(""),
                    "give exactly one of `fallback` (a tool) and `degrade` (a text)".into(),
                ));
            }
        };
        Ok(OnError {
            types: fields.types,
            recovery,
        })
    }

    /// Whether a failure of `error_type` is recovered from.
    pub fn covers(&self, error_type: &str) -> bool {
        self.types.iter().any(|t| t == error_type)
    }
}

/// Who shares a cached answer (`cache_scope`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CacheScope {
    /// Only the caller who made the call (the default).
    #[default]
    Caller,
    /// Every caller allowed the tool: for answers that depend on nothing but the arguments.
    Shared,
}

impl super::ToolContract {
    /// The error types a call of this tool can answer, as published: the gateway's own that
    /// its contract makes possible, then the declared ones.
    pub fn error_types(&self) -> Vec<&str> {
        let possible = |t: &ErrorType| match t {
            ErrorType::Denied => !self.when.is_empty() || !self.scopes.is_empty(),
            ErrorType::ApprovalDenied | ErrorType::ApprovalTimeout => {
                self.approval != super::Approval::None
            }
            // An idempotent call that timed out did nothing harmful; any other may have.
            ErrorType::Timeout => self.idempotent,
            ErrorType::UnknownOutcome => !self.idempotent,
            // Per-caller upstream credentials are not configured per tool yet.
            ErrorType::CredentialUnavailable => false,
            _ => true,
        };
        BUILTIN
            .iter()
            .filter(|t| possible(t))
            .map(ErrorType::as_str)
            .chain(self.errors.types().map(ErrorType::as_str))
            .collect()
    }

    /// The published description: the contract's, with the error types on its last line.
    pub fn published_description(&self) -> String {
        let types = self.error_types().join(", ");
        match self.description.as_deref().map(str::trim_end) {
            Some(text) if !text.is_empty() => format!("{text}\n\nErrors: {types}."),
            _ => format!("Errors: {types}."),
        }
    }
}

/// The JSON Schema of the object a typed failure carries as its `structuredContent`.
pub fn error_object_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "type": {"type": "string"},
                    "message": {"type": "string"},
                    "retry_after_ms": {"type": "integer", "minimum": 0},
                    "retryable": {"type": "boolean"}
                },
                "required": ["type", "message"]
            }
        },
        "required": ["error"]
    })
}

/// The `outputSchema` a tool publishes: its contract's, or a typed failure's error object.
/// Clients (the TypeScript SDK) validate an error result's `structuredContent` against it too.
/// The contract's `$defs` stay at the root so its references still resolve.
pub fn published_output(output: &Map<String, Value>) -> Map<String, Value> {
    let mut result = output.clone();
    let mut root = Map::new();
    root.insert("type".into(), "object".into());
    for key in [
        "$schema",
        "$defs",
        "definitions",
        "$id",
        "$anchor",
        "$dynamicAnchor",
    ] {
        if let Some(value) = result.remove(key) {
            root.insert(key.into(), value);
        }
    }
    root.insert(
        "anyOf".into(),
        json!([Value::Object(result), error_object_schema()]),
    );
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(yaml: &str) -> Result<ErrorRules, (String, String)> {
        let fields: ErrorsFields = serde_saphyr::from_str(yaml).expect("yaml");
        ErrorRules::build(fields)
    }

    /// Proves: the first matching rule wins, in file order, and text no rule matches is
    /// left to the caller (`upstream_error`).
    #[test]
    fn first_matching_rule_wins_in_file_order() {
        let r = rules("not_found: {match: \"(?i)no such|not found\", retry: false}\nconflict: {match: \"409|conflict|not found\"}\n").expect("builds");
        let hit = r.classify("Error: File NOT FOUND").expect("matches");
        assert_eq!(hit.error_type.as_str(), "not_found");
        assert_eq!(hit.retry, Some(false));
        assert_eq!(
            r.classify("HTTP 409").map(|h| h.error_type.as_str()),
            Some("conflict")
        );
        assert!(r.classify("permission denied").is_none());
    }

    /// Proves: a declared name may not shadow a gateway type or break the naming rule, and a
    /// bad regex is refused at load with where it is.
    #[test]
    fn bad_declarations_are_refused_at_load() {
        let e = rules("timeout: {match: x}\n").expect_err("builtin");
        assert!(e.1.contains("gateway's own"), "{e:?}");
        let e = rules("NotFound: {match: x}\n").expect_err("case");
        assert!(e.1.contains("^[a-z]"), "{e:?}");
        let e = rules("nf: {match: \"(\"}\n").expect_err("regex");
        assert_eq!(e.0, ".errors.nf.match");
    }

    /// Proves: on_error names only known types, takes exactly one recovery, and refuses a
    /// fallback for a write tool.
    #[test]
    fn on_error_is_checked() {
        let r = rules("not_found: {match: x}\n").expect("builds");
        let f = |yaml: &str| serde_saphyr::from_str::<OnErrorFields>(yaml).expect("yaml");
        assert!(
            OnError::build(
                f("{types: [unavailable, not_found], fallback: m}"),
                &r,
                true
            )
            .is_ok()
        );
        assert!(OnError::build(f("{types: [gone], degrade: x}"), &r, true).is_err());
        assert!(OnError::build(f("{types: [timeout], fallback: m}"), &r, false).is_err());
        assert!(
            OnError::build(f("{types: [timeout], fallback: m, degrade: x}"), &r, true).is_err()
        );
        assert!(OnError::build(f("{types: [timeout], degrade: x}"), &r, false).is_ok());
    }

    /// Proves: the published output schema admits both a valid result and the error object,
    /// keeps the contract's references resolvable, and still refuses anything else.
    #[test]
    fn published_output_admits_results_and_error_objects() {
        let output = json!({
            "type": "object",
            "$defs": {"n": {"type": "integer"}},
            "properties": {"sum": {"$ref": "#/$defs/n"}},
            "required": ["sum"],
            "additionalProperties": false
        });
        let published = Value::Object(published_output(output.as_object().expect("object")));
        let v = jsonschema::validator_for(&published).expect("compiles");
        assert!(v.is_valid(&json!({"sum": 3})));
        assert!(v.is_valid(&json!({"error": {"type": "timeout", "message": "m"}})));
        assert!(!v.is_valid(&json!({"sum": "3"})));
        assert!(!v.is_valid(&json!({"other": 1})));
    }
}
