//! `narrowgate init --upstream NAME`: a starting contract for every tool of an upstream, for the
//! operator to review and narrow.
//!
//! The output loads as it is and exposes the upstream's tools unchanged: schemas are brought to
//! 2020-12 (the dialect contracts are written in), texts are copied exactly, every tool is pinned
//! to the definition seen now, and names that clients could not use are mapped with
//! `upstream_tool:` kept. Privilege, side effects and idempotency can only be guessed from the
//! upstream's annotations, which are untrusted hints, so each guess says so in a comment.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use rmcp::model::Tool;
use serde_json::{Value, json};

use crate::contract::{digest, schema, valid_tool_name};
use crate::upstream::{Upstream, list_offer_once, list_tools_once};

/// `narrowgate init --help`: examples.
pub(super) const AFTER_HELP: &str = "Examples:
  narrowgate init --upstream files > contracts/files.yaml
  narrowgate init --upstream weather --config /etc/narrowgate/narrowgate.yaml > weather.yaml

Then review the file (delete tools, narrow `input`, check the GUESSED fields) and run
  narrowgate check
which must report every tool `narrower` with its pin matching.
Each contract file describes one upstream, and exposed names are unique across all files:
rename a tool (keeping `upstream_tool:`) if two upstreams share a name, or scaffold a second
copy of a server with a prefix:
  narrowgate init --upstream git2 --prefix git2_ > contracts/git2.yaml

Only this upstream's `${VAR}`s must be set (not the callers' keys nor other upstreams').";

/// How long the upstream may take to start, initialise and list its tools.
const LIST_WITHIN: Duration = Duration::from_secs(60);

pub fn run(config_path: &Path, upstream_name: &str, prefix: &str) -> ExitCode {
    if let Err(e) = check_prefix(prefix) {
        eprintln!("narrowgate init: {e}");
        return ExitCode::from(2);
    }
    // Only this upstream's environment is needed: not the callers' keys, nor other upstreams'.
    let needs = crate::config::Needs::Upstream(upstream_name.to_string());
    let config = match crate::config::Config::load_for(config_path, &needs) {
        Ok(c) => c,
        Err(errors) => {
            for e in &errors {
                eprintln!("narrowgate init: {e}");
                eprintln!("  {}", super::check::hint(e, config_path));
            }
            return ExitCode::from(2);
        }
    };
    let Some(upstream_config) = config.upstreams.get(upstream_name) else {
        let known: Vec<&str> = config.upstreams.keys().map(String::as_str).collect();
        let known = if known.is_empty() {
            "none yet: declare it under `upstreams:` first".to_string()
        } else {
            known.join(", ")
        };
        eprintln!(
            "narrowgate init: no upstream `{upstream_name}` in {}; configured upstreams: {known}",
            config_path.display()
        );
        return ExitCode::from(2);
    };
    let upstream = Upstream::new(upstream_name, upstream_config);
    // A server may list its MCP Apps tools only to hosts that can show them: init scaffolds
    // everything it offers.
    upstream.declare_extensions(vec![crate::contract::ui::UI_EXTENSION.to_string()]);
    let tools = match super::runtime(None)
        .map_err(|e| format!("cannot start the runtime: {e}"))
        .and_then(|rt| rt.block_on(list_tools_once(&upstream, LIST_WITHIN)))
    {
        Ok(listing) => listing.tools,
        Err(e) => {
            eprintln!(
                "narrowgate init: cannot list the tools of `{upstream_name}`: {e}\n  \
                 check `upstreams.{upstream_name}` in {} (command, args, url, headers) and that \
                 the server starts on its own",
                config_path.display()
            );
            return ExitCode::from(1);
        }
    };
    let mut rendered = render_prefixed(upstream_name, &tools, prefix);
    // Resources and prompts: an upstream that offers none (or fails to list them) adds nothing.
    if let Ok(offer) = super::runtime(None)
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(list_offer_once(&upstream, LIST_WITHIN)))
    {
        if !prefix.is_empty() && (!offer.resources.is_empty() || !offer.templates.is_empty()) {
            eprintln!(
                "narrowgate init: resources keep their URIs under --prefix, and a URI belongs to \
                 one upstream: they are written commented out (uncomment them if no other copy \
                 declares them)"
            );
        }
        rendered.text.push_str(&super::init_offer::render_prefixed(
            &offer,
            yaml_string,
            prefix,
        ));
    }
    for note in &rendered.left_out {
        eprintln!("narrowgate init: {note}");
    }
    if super::check::write_stdout("init", |out| out.write_all(rendered.text.as_bytes())) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A rendered contract file, and the tools that could not be included (with why).
pub struct Rendered {
    pub text: String,
    pub left_out: Vec<String>,
}

/// A `--prefix` every exposed name can start with: `[A-Za-z0-9_-]`, leaving room for a name.
#[derive(Debug, thiserror::Error)]
#[error(
    "--prefix `{0}` must be at most 63 of the characters A-Z a-z 0-9 _ - (exposed names match ^[A-Za-z0-9_-]{{1,64}}$), e.g. --prefix git2_"
)]
pub struct BadPrefix(String);

pub(super) fn check_prefix(prefix: &str) -> Result<(), BadPrefix> {
    if prefix.is_empty() || (prefix.len() < 64 && valid_tool_name(prefix)) {
        Ok(())
    } else {
        Err(BadPrefix(prefix.escape_debug().to_string()))
    }
}

/// The contract file for `tools` of `upstream`.
#[cfg(test)]
pub fn render(upstream: &str, tools: &[Tool]) -> Rendered {
    render_prefixed(upstream, tools, "")
}

/// The contract file for `tools` of `upstream`, each exposed as `prefix` and its name.
pub fn render_prefixed(upstream: &str, tools: &[Tool], prefix: &str) -> Rendered {
    let mut text = format!(
        "# Contract for upstream `{upstream}`, generated by `narrowgate init --upstream {upstream}`.\n\
         # It exposes every tool exactly as the upstream describes it. Before serving it, review\n\
         # each tool: delete the ones agents should not have, narrow `input` (enums, patterns,\n\
         # bounds, `additionalProperties: false`), declare or tighten `output`, check the guessed\n\
         # privilege/side_effects/idempotent, and add `scopes`, `rate` and `redact` as needed,\n\
         # and `approval` for irreversible tools (`check` warns of those without).\n\
         # Then run `narrowgate check`: every tool should be `narrower` with its pin matching.\n\
         upstream: {upstream}\n"
    );
    let names = exposed_names(tools, prefix);
    let mut left_out = Vec::new();
    let mut body = String::new();
    for (tool, exposed) in tools.iter().zip(&names) {
        match render_tool(tool, exposed) {
            Ok(block) => body.push_str(&block),
            Err(reason) => {
                let note = format!("tool `{}` left out: {reason}", tool.name);
                body.push_str(&format!("  # {}\n", note.replace('\n', " ")));
                left_out.push(note);
            }
        }
    }
    if body.lines().all(|l| l.trim_start().starts_with('#')) {
        text.push_str("tools: {}\n");
    } else {
        text.push_str("tools:\n");
    }
    text.push_str(&body);
    Rendered { text, left_out }
}

/// Exposed names: the upstream's own where valid; otherwise its characters outside
/// `[A-Za-z0-9_-]` become `_`, cut to 64, with `_2`, `_3`... added until unique. With a
/// `prefix`, each starts with it (cut to 64 likewise).
fn exposed_names(tools: &[Tool], prefix: &str) -> Vec<String> {
    if !prefix.is_empty() {
        // Prefixed, every name is a mapped one: made valid, then made unique.
        let renamed: Vec<Tool> = tools
            .iter()
            .map(|t| {
                let mut t = t.clone();
                t.name = format!("{prefix}{}", t.name).into();
                t
            })
            .collect();
        return exposed_names(&renamed, "");
    }
    // Valid upstream names keep their name: a mapped one must not take it.
    let reserved: BTreeSet<&str> = tools
        .iter()
        .map(|t| t.name.as_ref())
        .filter(|n| valid_tool_name(n))
        .collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    let mut names = Vec::with_capacity(tools.len());
    for t in tools {
        let valid = valid_tool_name(&t.name);
        let base: String = if valid {
            t.name.to_string()
        } else {
            t.name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(64)
                .collect()
        };
        let base = if base.is_empty() { "tool".into() } else { base };
        let free = |name: &str| !used.contains(name) && (valid || !reserved.contains(name));
        let mut name = base.clone();
        let mut n = 2;
        while !free(&name) {
            let suffix = format!("_{n}");
            let keep = 64usize.saturating_sub(suffix.len()).min(base.len());
            name = format!("{}{suffix}", &base[..keep]);
            n += 1;
        }
        used.insert(name.clone());
        names.push(name);
    }
    names
}

fn render_tool(tool: &Tool, exposed: &str) -> Result<String, String> {
    let input = usable_schema(&Value::Object(tool.input_schema.as_ref().clone()), true)
        .map_err(|e| format!("its inputSchema cannot be used in a contract: {e}"))?;
    let mut out = format!("  {}:\n", yaml_key(exposed));
    if exposed != tool.name && valid_tool_name(&tool.name) {
        out.push_str(&format!(
            "    upstream_tool: {}   # renamed with --prefix\n",
            yaml_string(&tool.name)
        ));
    } else if exposed != tool.name {
        out.push_str(&format!(
            "    upstream_tool: {}   # `{}` is not a valid exposed name (^[A-Za-z0-9_-]{{1,64}}$)\n",
            yaml_string(&tool.name),
            tool.name.escape_debug()
        ));
    }
    let annotations = tool.annotations.clone().unwrap_or_default();
    if let Some(title) = tool.title.as_ref().or(annotations.title.as_ref()) {
        out.push_str(&format!("    title: {}\n", yaml_string(title)));
    }
    if let Some(description) = &tool.description {
        out.push_str(&format!("    description: {}\n", yaml_string(description)));
    }
    out.push_str(&guesses(&annotations));
    out.push_str(&format!("    input:{}", yaml_block(&input, 6)));
    if let Some(output) = &tool.output_schema {
        match usable_schema(&Value::Object(output.as_ref().clone()), false) {
            Ok(output) => out.push_str(&format!("    output:{}", yaml_block(&output, 6))),
            Err(e) => out.push_str(&format!(
                "    # output: left out, the upstream's outputSchema cannot be used: {}\n",
                e.replace('\n', " ")
            )),
        }
    }
    out.push_str(&super::init_content::render(tool));
    out.push_str(&super::init_content::render_ui(tool, yaml_string));
    out.push_str(&format!(
        "    pin: {}   # the upstream's definition as seen now; `narrowgate check` reports changes\n",
        digest::tool_digest(tool)
    ));
    Ok(out)
}

/// The three guessed fields, each with the hint it came from. MCP's defaults for absent hints
/// are the cautious ones (not read-only, destructive, not idempotent).
fn guesses(a: &rmcp::model::ToolAnnotations) -> String {
    let hint = |name: &str, value: Option<bool>| match value {
        Some(v) => format!("{name}={v}"),
        None => format!("no {name}"),
    };
    let read_only = a.read_only_hint == Some(true);
    let read_only_note = hint("readOnlyHint", a.read_only_hint);
    let (side_effects, side_note) = if read_only {
        ("none", read_only_note.clone())
    } else if a.destructive_hint == Some(false) {
        ("reversible", hint("destructiveHint", a.destructive_hint))
    } else {
        ("irreversible", hint("destructiveHint", a.destructive_hint))
    };
    let idempotent = read_only || a.idempotent_hint == Some(true);
    let idempotent_note = if read_only {
        read_only_note.clone()
    } else {
        hint("idempotentHint", a.idempotent_hint)
    };
    let privilege = if read_only { "read" } else { "write" };
    format!(
        "    privilege: {privilege}   # GUESSED from the upstream's annotations ({read_only_note}): review\n    \
         side_effects: {side_effects}   # GUESSED from the upstream's annotations ({side_note}): review\n    \
         idempotent: {idempotent}   # GUESSED from the upstream's annotations ({idempotent_note}): review\n"
    )
}

/// The upstream schema in 2020-12, checked the way the contract loader will check it. An input
/// schema without `type` gets `type: object` (tool arguments are always an object).
fn usable_schema(upstream: &Value, is_input: bool) -> Result<Value, String> {
    let mut converted = schema::to_2020_12(upstream);
    // The loader refuses keys 2020-12 does not define (a typo would silently lose a constraint):
    // the upstream's extension keys and unknown formats are not copied.
    crate::contract::keywords::strip_unknown(&mut converted);
    if is_input
        && let Value::Object(map) = &mut converted
        && !map.contains_key("type")
    {
        map.insert("type".into(), json!("object"));
    }
    if is_input && converted.get("type").and_then(Value::as_str) != Some("object") {
        return Err("it is not an object schema (`type: object`)".into());
    }
    schema::check_meta(&converted)?;
    schema::compile(&converted)?;
    Ok(converted)
}

/// A schema as a YAML block indented by `indent`, starting with a newline; JSON flow style (also
/// YAML) when the block form would not read back as exactly the same value.
fn yaml_block(value: &Value, indent: usize) -> String {
    let block = serde_saphyr::to_string(value).ok().filter(|text| {
        matches!(value, Value::Object(m) if !m.is_empty())
            && serde_saphyr::from_str::<Value>(text).ok().as_ref() == Some(value)
    });
    match block {
        Some(text) => {
            let pad = " ".repeat(indent);
            let mut out = String::from("\n");
            for line in text.lines() {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    out.push_str(&format!("{pad}{line}\n"));
                }
            }
            out
        }
        None => format!(" {}\n", serde_json::to_string(value).unwrap_or_default()),
    }
}

/// A tool name as a mapping key: plain when YAML cannot read it as anything but that string.
fn yaml_key(name: &str) -> String {
    let special = [
        "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~",
    ];
    let plain = valid_tool_name(name)
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && !special.contains(&name.to_ascii_lowercase().as_str());
    if plain {
        name.to_string()
    } else {
        yaml_string(name)
    }
}

/// A double-quoted YAML string that reads back as exactly `text`: JSON escaping, plus `\u`
/// escapes for the characters YAML treats specially (NEL, line/paragraph separators, BOM).
fn yaml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in serde_json::to_string(text).unwrap_or_default().chars() {
        if matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}')
            || (c.is_control() && c != '\n')
        {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::ContractSet;
    use std::sync::Arc;

    fn tool(name: &str, description: &str, input: Value) -> Tool {
        let input = input.as_object().cloned().expect("object schema");
        Tool::new_with_raw(
            name.to_string(),
            Some(description.to_string().into()),
            Arc::new(input),
        )
    }

    fn load(text: &str) -> ContractSet {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("u.yaml"), text).expect("write");
        ContractSet::load_dir(dir.path()).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn invalid_and_colliding_names_are_mapped_and_keep_the_upstream_name() {
        let tools = [
            tool("files.read", "a", json!({"type": "object"})),
            tool("files/read", "b", json!({"type": "object"})),
            tool("files_read_2", "c", json!({"type": "object"})),
            tool("true", "d", json!({"type": "object"})),
            tool(&"x".repeat(70), "e", json!({"type": "object"})),
            tool("dup", "f", json!({"type": "object"})),
            tool("dup", "g", json!({"type": "object"})),
        ];
        let set = load(&render("u", &tools).text);
        let pairs: Vec<(&str, &str)> = set
            .tools
            .values()
            .map(|c| (c.name.as_str(), c.upstream_tool.as_str()))
            .collect();
        assert!(pairs.contains(&("files_read", "files.read")), "{pairs:?}");
        assert!(pairs.contains(&("files_read_3", "files/read")), "{pairs:?}");
        assert!(
            pairs.contains(&("files_read_2", "files_read_2")),
            "{pairs:?}"
        );
        assert!(pairs.contains(&("true", "true")), "{pairs:?}");
        assert!(
            pairs.contains(&(&*"x".repeat(64), &*"x".repeat(70))),
            "{pairs:?}"
        );
        assert!(
            pairs.contains(&("dup", "dup")) && pairs.contains(&("dup_2", "dup")),
            "{pairs:?}"
        );
    }

    #[test]
    fn texts_and_schemas_read_back_exactly() {
        let description = "Line one\nline \"two\"\t\u{2028}end: # not a comment\u{85}";
        let input = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "on": {"type": "string", "enum": ["yes", "no", "1.0", "null", "", "- x"]},
                "n": {"type": "number", "minimum": 1.5, "default": 10},
                "nested": {"type": "array", "items": [{"type": "string"}], "additionalItems": false}
            },
            "definitions": {"x": {"type": "integer"}},
            "required": ["on"]
        });
        let rendered = render("u", &[tool("t", description, input.clone())]);
        let set = load(&rendered.text);
        let t = &set.tools["t"];
        assert_eq!(t.description.as_deref(), Some(description));
        assert_eq!(t.input, schema::to_2020_12(&input));
        assert!(rendered.text.contains("# GUESSED"), "{}", rendered.text);
        assert_eq!(
            t.pin.as_deref(),
            Some(digest::tool_digest(&tool("t", description, input)).as_str())
        );
    }

    #[test]
    fn a_schema_without_type_gets_object_and_an_unusable_one_is_left_out() {
        let tools = [
            tool(
                "untyped",
                "a",
                json!({"properties": {"x": {"type": "string"}}}),
            ),
            tool(
                "broken",
                "b",
                json!({"type": "object", "properties": {"x": {"type": "strng"}}}),
            ),
        ];
        let rendered = render("u", &tools);
        let set = load(&rendered.text);
        assert_eq!(set.tools["untyped"].input["type"], "object");
        assert!(!set.tools.contains_key("broken"));
        assert_eq!(rendered.left_out.len(), 1, "{:?}", rendered.left_out);
        assert!(
            rendered.text.contains("# tool `broken` left out"),
            "{}",
            rendered.text
        );
    }

    #[test]
    fn no_tools_still_loads() {
        assert!(load(&render("u", &[]).text).tools.is_empty());
    }
}
