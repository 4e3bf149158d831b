//! `narrowgate check`'s report of the contracts' `resources:` and `prompts:`: one row each, a
//! problem for an entry whose upstream is not configured, and a warning for a resource URI that a
//! contracted tool points clients to (in its description, or as a `const`/`enum` URI in its
//! upstream output schema, where a `resource_link` would carry it) but no contract declares: a
//! client following that link would get "Resource not found".
//!
//! What can be seen without calling tools is checked: texts and schemas. URIs inside results
//! are only known when a tool runs; `http(s)://` links are left out (they are web pages more
//! often than resources).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use serde::Serialize;
use serde_json::Value;

use crate::config::Config;
use crate::contract::ContractSet;
use crate::contract::resources::UriMatch;
use crate::upstream::Snapshot;

#[derive(Serialize)]
pub(super) struct ResourceRow {
    /// The `uri` or `uri_template` as declared.
    resource: String,
    /// `uri`, `glob` or `template`.
    kind: &'static str,
    upstream: String,
    file: String,
}

#[derive(Serialize)]
pub(super) struct PromptRow {
    prompt: String,
    upstream: String,
    upstream_prompt: String,
    file: String,
    arguments: Vec<String>,
}

/// The rows, and a problem for each entry whose upstream is not configured.
pub(super) fn rows(
    config: &Config,
    contracts: &ContractSet,
    problems: &mut Vec<String>,
) -> (Vec<ResourceRow>, Vec<PromptRow>) {
    let mut missing = |what: String, upstream: &str, file: String| {
        if !config.upstreams.contains_key(upstream) {
            problems.push(format!(
                "{what}: upstream `{upstream}` is not configured (fix `upstream:` in {file})"
            ));
        }
    };
    let resources = contracts
        .resources
        .iter()
        .map(|r| {
            let file = r.file.display().to_string();
            missing(
                format!("resource `{}`", r.declared()),
                &r.upstream,
                file.clone(),
            );
            ResourceRow {
                resource: r.declared().to_string(),
                kind: match r.matcher {
                    UriMatch::Exact(_) => "uri",
                    UriMatch::Glob(_) => "glob",
                    UriMatch::Template { .. } => "template",
                },
                upstream: r.upstream.clone(),
                file,
            }
        })
        .collect();
    let prompts = contracts
        .prompts
        .values()
        .map(|p| {
            let file = p.file.display().to_string();
            missing(format!("prompt `{}`", p.name), &p.upstream, file.clone());
            PromptRow {
                prompt: p.name.clone(),
                upstream: p.upstream.clone(),
                upstream_prompt: p.upstream_prompt.clone(),
                file,
                arguments: p.arguments.iter().map(|a| a.name.clone()).collect(),
            }
        })
        .collect();
    (resources, prompts)
}

/// Warnings for URIs contracted tools point to that no resource contract declares.
pub(super) fn link_warnings(
    contracts: &ContractSet,
    snapshots: Option<&BTreeMap<String, Snapshot>>,
) -> Vec<String> {
    let mut warnings = BTreeSet::new();
    for (name, tool) in &contracts.tools {
        let mut uris = Vec::new();
        if let Some(d) = &tool.description {
            uris.extend(uris_in(d));
        }
        let upstream_tool = snapshots.and_then(|s| s.get(&tool.upstream)).and_then(|s| {
            s.tools
                .iter()
                .find(|t| t.name == tool.upstream_tool.as_str())
        });
        if let Some(t) = upstream_tool {
            if let Some(d) = &t.description {
                uris.extend(uris_in(d));
            }
            if let Some(schema) = &t.output_schema {
                schema_uris(&Value::Object((**schema).clone()), &mut uris);
            }
        }
        for uri in uris {
            if contracts.resource_for(&uri).is_none() {
                warnings.insert(format!(
                    "tool `{name}` points to `{uri}`, which no contract declares under `resources:`: clients following it get \"Resource not found\""
                ));
            }
        }
    }
    warnings.into_iter().collect()
}

/// URI-like words (`scheme://rest`) in a text, but not web links.
fn uris_in(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | '(' | ')'))
        .filter_map(|word| {
            let (scheme, rest) = word.split_once("://")?;
            let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            let web = matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https");
            (scheme_ok && !web && !rest.is_empty())
                .then(|| word.trim_end_matches(['.', ',', ';', ':']).to_string())
        })
        .collect()
}

/// The URI-like `const` and `enum` values anywhere in a schema.
fn schema_uris(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("const", Value::String(s)) => out.extend(uris_in(s)),
                    ("enum", Value::Array(items)) => {
                        for s in items.iter().filter_map(Value::as_str) {
                            out.extend(uris_in(s));
                        }
                    }
                    _ => schema_uris(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| schema_uris(v, out)),
        _ => {}
    }
}

/// The table's resources and prompts sections (nothing when there are none).
pub(super) fn print(
    out: &mut dyn Write,
    resources: &[ResourceRow],
    prompts: &[PromptRow],
) -> io::Result<()> {
    if !resources.is_empty() {
        writeln!(out, "RESOURCE  (kind, upstream)")?;
        for r in resources {
            writeln!(out, "  {}  ({}, {})", r.resource, r.kind, r.upstream)?;
        }
        writeln!(out)?;
    }
    if !prompts.is_empty() {
        writeln!(out, "PROMPT  (upstream prompt, upstream: arguments)")?;
        for p in prompts {
            writeln!(
                out,
                "  {}  ({}, {}: {})",
                p.prompt,
                p.upstream_prompt,
                p.upstream,
                p.arguments.join(", ")
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves URI-like words are found in texts and schemas, web links and plain words are not.
    #[test]
    fn uris_are_found_in_texts_and_schemas() {
        assert_eq!(
            uris_in("Reads (test://static-text). See https://example.com or file:///srv/a."),
            ["test://static-text", "file:///srv/a"]
        );
        let mut found = Vec::new();
        schema_uris(
            &serde_json::json!({"properties": {"uri": {"const": "test://x"}, "k": {"enum": ["a", "db://y"]}}}),
            &mut found,
        );
        found.sort();
        assert_eq!(found, ["db://y", "test://x"]);
    }
}
