//! Enforcing a contract at call time (docs/semantics.md): arguments are checked before anything is
//! sent upstream, results before anything is returned. Both checks only ever describe a failure by
//! path and rule: the rejected data itself never appears in a message.

use jsonschema::Validator;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use super::ToolContract;
use super::content::{self, ContentRule};
use super::fixed::{Unresolved, Who};
use super::keywords::is_validation_keyword;
use super::schema::{Violation, first_violation};

/// Which schema rejected the arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentRejection {
    Contract(Violation),
    Upstream(Violation),
    /// A fixed argument names a value of the caller it does not have.
    Fixed(Unresolved),
}

impl std::fmt::Display for ArgumentRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgumentRejection::Contract(v) => write!(f, "arguments rejected by the contract: {v}"),
            ArgumentRejection::Fixed(unresolved) => write!(f, "{unresolved}"),
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

/// The arguments as they go upstream: the client's, checked against the contract (a fixed
/// argument sent is refused), then with the `fixed` ones set for `who`, checked against the
/// upstream's own schema. `None` when the tool fixes nothing (the client's go as they are).
pub fn arguments_to_send(
    tool: &ToolContract,
    upstream: Option<&Validator>,
    arguments: &Value,
    who: &Who,
) -> Result<Option<Value>, ArgumentRejection> {
    if tool.fixed.is_empty() {
        return check_arguments(&tool.input_validator, upstream, arguments).map(|()| None);
    }
    if let Some(v) = tool.fixed.sent_by_client(arguments) {
        return Err(ArgumentRejection::Contract(v));
    }
    if let Some(v) = first_violation(&tool.input_validator, arguments) {
        return Err(ArgumentRejection::Contract(v));
    }
    let mut sent = arguments.as_object().cloned().unwrap_or_default();
    tool.fixed
        .apply(&mut sent, who)
        .map_err(ArgumentRejection::Fixed)?;
    let sent = Value::Object(sent);
    let written = tool.fixed_validator.as_deref();
    if let Some(v) = written.and_then(|w| first_violation(w, &sent)) {
        return Err(ArgumentRejection::Contract(v));
    }
    if let Some(v) = upstream.and_then(|u| first_violation(u, &sent)) {
        return Err(ArgumentRejection::Upstream(v));
    }
    Ok(Some(sent))
}

/// Why a result was not passed to the client. Rejections describe the contract (the schema path
/// and rule), never the result: the upstream's keys and values stay out of the message.
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
            // The instance path and the validator's detail would quote the result's keys.
            ResultRejection::Contract(v) => write!(
                f,
                "result rejected by the contract's output schema: it violates `{}` at {} in the contract's output schema",
                v.rule, v.schema_path
            ),
            // The upstream's schema path would quote the upstream's own property names.
            ResultRejection::Upstream(v) => write!(
                f,
                "result rejected by the upstream tool's own outputSchema: it violates a `{}` rule there",
                if is_validation_keyword(&v.rule) { v.rule.as_str() } else { "schema" }
            ),
        }
    }
}

/// The output schemas that apply to a tool's results, and the bounds on what passes.
pub struct OutputSchemas<'a> {
    pub contract: Option<&'a Validator>,
    pub upstream: Option<&'a Validator>,
    pub max_bytes: usize,
    /// The most bytes of an upstream error's text that reach the client (`error_text_bytes`).
    pub error_text_bytes: usize,
    /// The content blocks that pass as sent (the contract's `content:`).
    pub content: &'a [ContentRule],
}

/// Checks an upstream result. With a contract output schema, the structured result (lifted from a
/// lone JSON text block when needed) must satisfy both output schemas, and only content blocks the
/// contract vouches for pass as sent ([`vouched_content`]): nothing outside the contract reaches
/// the client. Without one, only the blocks `content:` allows pass. An upstream tool error
/// becomes one bounded, escaped text block ([`tool_error_of`]).
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
        return Ok(tool_error_of(result, schemas));
    }
    let Some(contract) = schemas.contract else {
        result
            .content
            .retain(|block| content::allows(schemas.content, block));
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
    let blocks = vouched_content(result.content, &structured, schemas.content);
    let mut checked = CallToolResult::success(blocks);
    checked.structured_content = Some(structured);
    Ok(checked)
}

/// The content of a result whose `structured` content validated: each block the contract
/// vouches for as sent (a text repeating `structured` or one of its string values, a block
/// `content:` allows), and in place of the first block it does not, the JSON of `structured`
/// (once, and not when a kept text already is that JSON). A result with no content gets that
/// JSON too, for clients that read only text.
fn vouched_content(
    blocks: Vec<ContentBlock>,
    structured: &Value,
    rules: &[ContentRule],
) -> Vec<ContentBlock> {
    let mut kept = Vec::with_capacity(blocks.len().max(1));
    let mut replace_at = blocks.is_empty().then_some(0);
    let mut has_json = false;
    let mut compact = None;
    for block in blocks {
        let vouched = match &block {
            ContentBlock::Text(t) => match content::vouched_text(&t.text, structured, &mut compact)
            {
                content::Vouched::No => false,
                // Only a JSON text that passes makes the replacement unneeded.
                content::Vouched::Json => {
                    let allowed = content::allows(rules, &block);
                    has_json |= allowed;
                    allowed
                }
                content::Vouched::StringValue => content::allows(rules, &block),
            },
            _ => content::allows(rules, &block),
        };
        if vouched {
            kept.push(block);
        } else if replace_at.is_none() {
            replace_at = Some(kept.len());
        }
    }
    if let Some(at) = replace_at
        && !has_json
    {
        let json = compact.unwrap_or_else(|| serde_json::to_string(structured).unwrap_or_default());
        kept.insert(at.min(kept.len()), ContentBlock::text(json));
    }
    kept
}

/// An upstream tool error (`isError: true`) as the client gets it: its text blocks joined into one
/// text block, bounded and with control characters escaped ([`bounded_text`]). The contract says
/// nothing about errors, so for a tool with `output` nothing else of it passes (no
/// `structuredContent`, images, audio, resources or links); a tool without `output` keeps the
/// other content blocks its `content:` allows and its structured content, as its successful
/// results do.
fn tool_error_of(result: CallToolResult, schemas: &OutputSchemas<'_>) -> CallToolResult {
    let mut text = String::new();
    let mut others = Vec::new();
    for block in result.content {
        match block.as_text() {
            Some(t) => {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&t.text);
            }
            None => others.push(block),
        }
    }
    if text.is_empty() {
        text.push_str("the upstream tool reported an error");
    }
    let mut content = vec![ContentBlock::text(bounded_text(
        "",
        &text,
        schemas.error_text_bytes,
    ))];
    if schemas.contract.is_some() {
        return CallToolResult::error(content);
    }
    content.extend(
        others
            .into_iter()
            .filter(|block| content::allows(schemas.content, block)),
    );
    let mut error = CallToolResult::error(content);
    error.structured_content = result.structured_content;
    error
}

/// What marks a text cut short by [`bounded_text`].
const TRUNCATED: &str = " [truncated]";

/// `prefix` (the gateway's own words) followed by the upstream's `text`, at most `limit` bytes
/// in all, the upstream's control characters escaped as `\u{..}`: terminal escapes, carriage
/// returns, NULs and the invisible format characters that reorder or hide text (bidirectional
/// overrides, zero-width characters) never reach a client or a model as they are. Newlines and
/// tabs are kept (error texts are often several lines). A text cut short ends with
/// `[truncated]`. Stops reading `text` once the bound is reached, whatever its length.
pub fn bounded_text(prefix: &str, text: &str, limit: usize) -> String {
    let mut out = String::with_capacity(limit.min(prefix.len() + text.len()));
    out.push_str(prefix);
    // The last length at which the marker still fits.
    let keep_within = limit.saturating_sub(TRUNCATED.len());
    let mut cut = out.len().min(keep_within);
    let mut piece = String::new();
    for c in text.chars() {
        piece.clear();
        if must_escape(c) {
            piece.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            piece.push(c);
        }
        if out.len() + piece.len() > limit {
            out.truncate(cut);
            out.push_str(TRUNCATED);
            return out;
        }
        out.push_str(&piece);
        if out.len() <= keep_within {
            cut = out.len();
        }
    }
    out
}

/// Control characters (other than newline and tab) and the format characters that change how
/// text is shown without being seen.
fn must_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
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
mod tests;
