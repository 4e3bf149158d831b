//! One tool's contract compiled: its fields checked, its schemas compiled, its digest taken.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

/// Checks one tool's fields and compiles its schemas. Errors carry a key suffix and a message.
pub(super) fn build(
    file: &Path,
    upstream: &str,
    name: &str,
    f: ToolContractFields,
) -> Result<ToolContract, (String, String)> {
    let err = |sub: &str, message: String| Err((sub.to_string(), message));
    if !valid_tool_name(name) {
        return err(
            "",
            "an exposed tool name must match ^[A-Za-z0-9_-]{1,64}$".into(),
        );
    }
    let idempotent = f.idempotent.unwrap_or(f.privilege == Privilege::Read);
    if f.retries > 0 && !idempotent {
        return err(
            ".retries",
            "retries must be 0 unless the tool is idempotent: a retried write could take effect twice".into(),
        );
    }
    let side_effects = f.side_effects.unwrap_or(match f.privilege {
        Privilege::Read => SideEffects::None,
        // Unless told otherwise, assume the worst: clients then ask before calling it.
        _ => SideEffects::Irreversible,
    });
    // No `input` means the tool takes no arguments.
    let input = f
        .input
        .unwrap_or_else(|| json!({"type": "object", "additionalProperties": false}));
    if input.get("type").and_then(Value::as_str) != Some("object") {
        return err(".input", "must be an object schema (`type: object`)".into());
    }
    checked_schema(&input, ".input")?;
    let fixed = fixed::Fixed::build(f.fixed)?;
    // Some fixed argument constrained under `input.properties`: its value is checked with the
    // written schema (other fixed arguments admitted there as they are).
    let constrains_fixed = fixed.names().any(|n| input["properties"].get(n).is_some());
    let fixed_validator = match constrains_fixed {
        false => None,
        true => {
            let mut written = input.clone();
            if let Some(properties) = written["properties"].as_object_mut() {
                for name in fixed.names() {
                    properties.entry(name).or_insert(Value::Bool(true));
                }
            }
            Some(checked_schema(&written, ".input")?)
        }
    };
    let written_input = input;
    let input = fixed.without_fixed(&written_input);
    let input_validator = checked_schema(&input, ".input")?;
    let output_validator = match &f.output {
        Some(output) => Some(checked_schema(output, ".output")?),
        None => None,
    };
    for (i, pointer) in f.redact.iter().enumerate() {
        if !pointer.starts_with('/') {
            return err(
                &format!(".redact.{i}"),
                format!("`{pointer}` must be a JSON pointer like /token"),
            );
        }
    }
    if let Some(pin) = &f.pin {
        let ok = pin
            .strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()));
        if !ok {
            return err(
                ".pin",
                "must be `sha256:` and 64 hex digits, as `narrowgate check` prints it".into(),
            );
        }
    }
    if f.approval_timeout.is_some() && f.approval != Approval::Approver {
        return err(
            ".approval_timeout",
            "applies only to `approval: approver` (a user's answer comes with the call)".into(),
        );
    }
    let mut described = json!({
        "name": name, "upstream": upstream, "upstream_tool": f.upstream_tool,
        "title": f.title, "description": f.description,
        "privilege": format!("{:?}", f.privilege), "side_effects": format!("{side_effects:?}"),
        "idempotent": idempotent, "timeout": f.timeout.map(|d| d.0.as_millis() as u64),
        "retries": f.retries, "scopes": f.scopes, "rate": f.rate.map(|r| r.to_string()),
        "dedupe": f.dedupe.map(|d| d.0.as_millis() as u64),
        "input": written_input, "output": f.output, "redact": f.redact, "pin": f.pin,
    });
    // Only when written, so that the digests of contracts without `fixed:` stay what they were.
    if !fixed.is_empty()
        && let Some(fields) = described.as_object_mut()
    {
        fields.insert("fixed".into(), json!(fixed.written()));
    }
    // Only when present, so that the digests of contracts without preconditions stay as they were.
    if !f.when.is_empty()
        && let Some(fields) = described.as_object_mut()
    {
        let when: Vec<Value> = f.when.iter().map(|w| json!([w.expr, w.message])).collect();
        fields.insert("when".into(), Value::Array(when));
    }
    // Likewise only when written.
    if let Some(policy) = &f.relay
        && let Some(fields) = described.as_object_mut()
    {
        fields.insert("relay".into(), json!(policy));
    }
    // Only when set, so that the digests of contracts without approval stay what they were.
    if f.approval != Approval::None
        && let Some(fields) = described.as_object_mut()
    {
        fields.insert("approval".into(), json!(f.approval));
        fields.insert(
            "approval_timeout".into(),
            json!(f.approval_timeout.map(|d| d.0.as_millis() as u64)),
        );
    }
    let content = content::build(f.content)?;
    // Only when written, so that the digests of contracts without `content:` stay what they were.
    if !content.is_empty()
        && let Some(fields) = described.as_object_mut()
    {
        fields.insert("content".into(), json!(content));
    }
    let ui = f.ui.map(ui::Ui::build).transpose()?;
    if let Some(ui) = &ui
        && let Some(fields) = described.as_object_mut()
    {
        fields.insert("ui".into(), json!(ui));
    }
    let error_rules = errors::ErrorRules::build(f.errors)?;
    let on_error = f
        .on_error
        .map(|fields| errors::OnError::build(fields, &error_rules, f.privilege == Privilege::Read))
        .transpose()?;
    if f.cache.is_some() && !(f.privilege == Privilege::Read && idempotent) {
        return err(
            ".cache",
            "only a read-only, idempotent tool may be cached: a cached write would not happen"
                .into(),
        );
    }
    if f.cache_scope.is_some() && f.cache.is_none() {
        return err(".cache_scope", "applies only with `cache:`".into());
    }
    // Each only when written, so that the digests of contracts without them stay what they were.
    if let Some(fields) = described.as_object_mut() {
        if !error_rules.is_empty() {
            fields.insert("errors".into(), error_rules.written());
        }
        if let Some(on_error) = &on_error {
            let recovery = match &on_error.recovery {
                errors::Recovery::Fallback(tool) => json!({"fallback": tool}),
                errors::Recovery::Degrade(text) => json!({"degrade": text}),
            };
            fields.insert("on_error".into(), json!([on_error.types, recovery]));
        }
        if let Some(window) = f.cache {
            fields.insert("cache".into(), json!(window.0.as_millis() as u64));
            fields.insert(
                "cache_scope".into(),
                json!(f.cache_scope.unwrap_or_default()),
            );
        }
    }
    let digest = digest::sha256_of(&described);
    let when = when::compile(f.when)?;
    Ok(ToolContract {
        name: name.to_string(),
        upstream: upstream.to_string(),
        upstream_tool: f.upstream_tool.unwrap_or_else(|| name.to_string()),
        file: file.to_path_buf(),
        title: f.title,
        description: f.description,
        privilege: f.privilege,
        side_effects,
        idempotent,
        timeout: f.timeout.map(|d| d.0),
        retries: f.retries,
        scopes: f.scopes,
        rate: f.rate,
        dedupe: f.dedupe.map(|d| d.0),
        input,
        fixed,
        fixed_validator,
        output: f.output,
        input_validator,
        output_validator,
        content: if content.is_empty() {
            content::default_rules()
        } else {
            content
        },
        ui,
        redact: f.redact,
        pin: f.pin,
        when,
        approval: f.approval,
        approval_timeout: f.approval_timeout.map_or(DEFAULT_APPROVAL_TIMEOUT, |d| d.0),
        digest,
        relay: f.relay.unwrap_or_default(),
        errors: error_rules,
        on_error,
        cache: f.cache.map(|d| d.0),
        cache_scope: f.cache_scope.unwrap_or_default(),
    })
}

/// A contract schema must be 2020-12 (the dialect the gateway publishes), valid against its
/// meta-schema, use only keywords 2020-12 defines (a misspelt one would be ignored, its
/// constraint lost and the typo published), and compile offline. Errors carry the key path below
/// the tool (`at`, then the path inside the schema) and a message.
pub(super) fn checked_schema(schema: &Value, at: &str) -> Result<Arc<Validator>, (String, String)> {
    let here = |m: String| (at.to_string(), m);
    if let Some(dialect) = schema.get("$schema").and_then(Value::as_str)
        && dialect.trim_end_matches('#') != schema::DRAFT_2020_12
    {
        return Err(here(format!(
            "contracts are written in JSON Schema 2020-12; remove `$schema: {dialect}`"
        )));
    }
    schema::check_meta(schema).map_err(here)?;
    if let Some(unknown) = keywords::unknown_keywords(schema).into_iter().next() {
        return Err((format!("{at}.{}", unknown.path), unknown.message));
    }
    schema::compile(schema).map_err(here)
}
