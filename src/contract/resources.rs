//! The `resources:` and `prompts:` sections of a contract file: which of an upstream's resources
//! and prompts clients may see, under which texts, and what a read or a get must stay within.
//!
//! Default deny extends from tools to these: a resource URI no entry matches, or a prompt no entry
//! names, does not exist for clients. Everything clients see of them (descriptions, argument
//! texts) comes from here; the upstream's texts are never published.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jsonschema::Validator;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::ByteSize;
use crate::config::glob::glob_match;

/// One entry of `resources:` as written: a URI (exact, or a glob with `*`/`?`), or a URI
/// template with its variables.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Resource contract")]
pub(super) struct ResourceFields {
    /// A resource URI as the upstream names it (`test://static-text`), or a glob over URIs
    /// (`file:///srv/docs/*`: `*` any run of characters, `?` one). Set this or `uri_template`.
    uri: Option<String>,
    /// An RFC 6570 URI template with simple `{name}` variables (`test://template/{id}/data`),
    /// published as declared. Set this or `uri`.
    uri_template: Option<String>,
    /// The template's variables: every `{name}` of `uri_template`, each with the `pattern` (a
    /// regular expression) its value must match. A read whose URI fills a variable outside its
    /// pattern does not exist for clients.
    #[serde(default)]
    variables: BTreeMap<String, VariableFields>,
    /// The description clients see; the upstream's is never published.
    description: Option<String>,
    /// The MIME types a read may return; a content with another (or none) is rejected. Any when
    /// empty.
    #[serde(default)]
    mime_types: Vec<String>,
    /// The most a read may return (text and base64 blobs together); `max_result_bytes` by
    /// default.
    max_bytes: Option<ByteSize>,
}

/// A template variable (also a completion's argument).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct VariableFields {
    /// A regular expression (JSON Schema `pattern`) the value must match.
    pattern: Option<String>,
    /// Values the variable may take, if only these.
    #[serde(default, rename = "enum")]
    enum_values: Vec<String>,
}

/// One entry of `prompts:` as written (the key is the exposed name).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Prompt contract")]
pub(super) struct PromptFields {
    /// The upstream's name for the prompt; the exposed name by default.
    upstream_prompt: Option<String>,
    /// The description clients see; the upstream's is never published.
    description: Option<String>,
    /// The only arguments a client may pass, each narrowed like a string schema. Without it the
    /// prompt takes none.
    #[serde(default)]
    arguments: BTreeMap<String, ArgumentFields>,
}

/// A prompt argument: a string within `enum` and `pattern`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ArgumentFields {
    /// Whether a get without it is refused.
    #[serde(default)]
    required: bool,
    /// The values it may take, if only these.
    #[serde(default, rename = "enum")]
    enum_values: Vec<String>,
    /// A regular expression (JSON Schema `pattern`) its value must match.
    pattern: Option<String>,
    /// The description clients see.
    description: Option<String>,
}

/// How a resource entry matches URIs.
#[derive(Debug)]
pub enum UriMatch {
    Exact(String),
    Glob(String),
    Template {
        template: String,
        parts: Vec<TemplatePart>,
    },
}

/// A piece of a URI template: literal text, or a variable's name.
#[derive(Debug, PartialEq, Eq)]
pub enum TemplatePart {
    Literal(String),
    Variable(String),
}

/// A string narrowed by `enum` and `pattern` (a template variable or a prompt argument).
pub struct StringRule {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
    pub enum_values: Vec<String>,
    pub pattern: Option<String>,
    validator: Arc<Validator>,
}

impl std::fmt::Debug for StringRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StringRule")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StringRule {
    /// Whether `value` is within the rule.
    pub fn allows(&self, value: &str) -> bool {
        self.validator.is_valid(&Value::String(value.to_string()))
    }
}

/// A checked resource entry.
#[derive(Debug)]
pub struct ResourceContract {
    pub upstream: String,
    pub file: PathBuf,
    pub matcher: UriMatch,
    pub variables: Vec<StringRule>,
    pub description: Option<String>,
    pub mime_types: Vec<String>,
    /// `None`: the configuration's `max_result_bytes`.
    pub max_bytes: Option<u64>,
}

impl ResourceContract {
    /// What the entry was declared as (its `uri` or `uri_template`): how errors and `check` name
    /// it.
    pub fn declared(&self) -> &str {
        match &self.matcher {
            UriMatch::Exact(s) | UriMatch::Glob(s) => s,
            UriMatch::Template { template, .. } => template,
        }
    }

    /// Whether a read of `uri` is within this entry (a template's variables within their
    /// rules).
    pub fn matches(&self, uri: &str) -> bool {
        match &self.matcher {
            UriMatch::Exact(exact) => exact == uri,
            UriMatch::Glob(glob) => glob_match(glob, uri),
            UriMatch::Template { parts, .. } => match fill(parts, uri) {
                Some(values) => values.iter().all(|(name, value)| {
                    self.variables
                        .iter()
                        .find(|v| v.name == *name)
                        .is_some_and(|v| v.allows(value))
                }),
                None => false,
            },
        }
    }

    /// The template variable `name`, if this is a template that has it.
    pub fn variable(&self, name: &str) -> Option<&StringRule> {
        self.variables.iter().find(|v| v.name == name)
    }
}

/// A checked prompt entry.
#[derive(Debug)]
pub struct PromptContract {
    pub name: String,
    pub upstream: String,
    pub upstream_prompt: String,
    pub file: PathBuf,
    pub description: Option<String>,
    pub arguments: Vec<StringRule>,
}

impl PromptContract {
    pub fn argument(&self, name: &str) -> Option<&StringRule> {
        self.arguments.iter().find(|a| a.name == name)
    }
}

/// Splits a template into literals and `{name}` variables; only simple expansion is supported.
fn parse_template(template: &str) -> Result<Vec<TemplatePart>, String> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(TemplatePart::Literal(rest[..open].to_string()));
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("`{template}` has a `{{` without its `}}`"))?;
        let name = &rest[open + 1..open + close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "`{{{name}}}` in `{template}`: only simple `{{name}}` variables are supported"
            ));
        }
        if matches!(parts.last(), Some(TemplatePart::Variable(_))) {
            return Err(format!(
                "`{template}`: two variables in a row cannot be told apart"
            ));
        }
        parts.push(TemplatePart::Variable(name.to_string()));
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(TemplatePart::Literal(rest.to_string()));
    }
    Ok(parts)
}

/// The variables' values if `uri` fills the template; a value never contains `/` (as a simple
/// expansion would have escaped it).
fn fill<'a>(parts: &'a [TemplatePart], uri: &'a str) -> Option<Vec<(&'a str, &'a str)>> {
    let mut values = Vec::new();
    let mut rest = uri;
    let mut i = 0;
    while i < parts.len() {
        match &parts[i] {
            TemplatePart::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
            TemplatePart::Variable(name) => {
                let end = match parts.get(i + 1) {
                    Some(TemplatePart::Literal(next)) => rest.find(next.as_str())?,
                    _ => rest.len(),
                };
                let value = &rest[..end];
                if value.is_empty() || value.contains('/') {
                    return None;
                }
                values.push((name.as_str(), value));
                rest = &rest[end..];
            }
        }
        i += 1;
    }
    rest.is_empty().then_some(values)
}

/// Compiles `enum` and `pattern` into a string schema. Errors carry a key suffix and a message.
fn rule(
    name: &str,
    at: &str,
    required: bool,
    enum_values: Vec<String>,
    pattern: Option<String>,
    description: Option<String>,
) -> Result<StringRule, (String, String)> {
    let mut schema = json!({"type": "string"});
    if !enum_values.is_empty() {
        schema["enum"] = json!(enum_values);
    }
    if let Some(p) = &pattern {
        schema["pattern"] = json!(p);
    }
    let validator = super::build::checked_schema(&schema, at)?;
    Ok(StringRule {
        name: name.to_string(),
        description,
        required,
        enum_values,
        pattern,
        validator,
    })
}

/// Checks one `resources:` entry (at index `i`).
pub(super) fn build_resource(
    file: &Path,
    upstream: &str,
    i: usize,
    f: ResourceFields,
) -> Result<ResourceContract, (String, String)> {
    let at = format!("resources.{i}");
    let matcher = match (f.uri, f.uri_template) {
        (Some(uri), None) if uri.contains(['*', '?']) => UriMatch::Glob(uri),
        (Some(uri), None) if !uri.is_empty() => UriMatch::Exact(uri),
        (None, Some(template)) => {
            let parts = parse_template(&template).map_err(|m| (format!("{at}.uri_template"), m))?;
            UriMatch::Template { template, parts }
        }
        _ => {
            return Err((
                at,
                "set exactly one of `uri` (a URI or a glob) and `uri_template`".into(),
            ));
        }
    };
    let mut variables = Vec::new();
    if let UriMatch::Template { parts, .. } = &matcher {
        let names: Vec<&str> = parts
            .iter()
            .filter_map(|p| match p {
                TemplatePart::Variable(n) => Some(n.as_str()),
                TemplatePart::Literal(_) => None,
            })
            .collect();
        for name in &names {
            if !f.variables.contains_key(*name) {
                return Err((
                    format!("{at}.variables"),
                    format!("the template's `{{{name}}}` needs an entry with its `pattern`"),
                ));
            }
        }
        for (name, v) in f.variables {
            let key = format!("{at}.variables.{name}");
            if !names.contains(&name.as_str()) {
                return Err((key, format!("the template has no `{{{name}}}`")));
            }
            if v.pattern.is_none() && v.enum_values.is_empty() {
                return Err((
                    key,
                    "a variable needs a `pattern` (or an `enum`): its value goes upstream".into(),
                ));
            }
            variables.push(rule(&name, &key, true, v.enum_values, v.pattern, None)?);
        }
    } else if !f.variables.is_empty() {
        return Err((
            format!("{at}.variables"),
            "only a `uri_template` has variables".into(),
        ));
    }
    Ok(ResourceContract {
        upstream: upstream.to_string(),
        file: file.to_path_buf(),
        matcher,
        variables,
        description: f.description,
        mime_types: f.mime_types,
        max_bytes: f.max_bytes.map(|b| b.0),
    })
}

/// Checks one `prompts:` entry.
pub(super) fn build_prompt(
    file: &Path,
    upstream: &str,
    name: &str,
    f: PromptFields,
) -> Result<PromptContract, (String, String)> {
    let at = format!("prompts.{name}");
    if !super::valid_tool_name(name) {
        return Err((
            at,
            "an exposed prompt name must match ^[A-Za-z0-9_-]{1,64}$".into(),
        ));
    }
    let mut arguments = Vec::new();
    for (arg, a) in f.arguments {
        let key = format!("{at}.arguments.{arg}");
        arguments.push(rule(
            &arg,
            &key,
            a.required,
            a.enum_values,
            a.pattern,
            a.description,
        )?);
    }
    Ok(PromptContract {
        name: name.to_string(),
        upstream: upstream.to_string(),
        upstream_prompt: f.upstream_prompt.unwrap_or_else(|| name.to_string()),
        file: file.to_path_buf(),
        description: f.description,
        arguments,
    })
}

/// A load error if `new` declares what an entry of another file already does: the same URI or
/// template, or an exact URI that another upstream's glob also covers (a read could not tell which
/// upstream to ask).
pub(super) fn clash<'a>(
    existing: &'a [Arc<ResourceContract>],
    new: &ResourceContract,
) -> Option<&'a ResourceContract> {
    existing
        .iter()
        .map(AsRef::as_ref)
        .find(|old| match (&old.matcher, &new.matcher) {
            (UriMatch::Exact(a), UriMatch::Glob(g)) | (UriMatch::Glob(g), UriMatch::Exact(a)) => {
                old.upstream != new.upstream && glob_match(g, a)
            }
            _ => old.declared() == new.declared(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(t: &str, var: &str, pattern: &str) -> ResourceContract {
        let mut variables = BTreeMap::new();
        variables.insert(
            var.to_string(),
            VariableFields {
                pattern: Some(pattern.into()),
                enum_values: vec![],
            },
        );
        let fields = ResourceFields {
            uri: None,
            uri_template: Some(t.into()),
            variables,
            description: None,
            mime_types: vec![],
            max_bytes: None,
        };
        build_resource(Path::new("c.yaml"), "u", 0, fields).expect("builds")
    }

    /// Proves a template matches only URIs that fill every variable within its pattern, with
    /// the literals around them exact.
    #[test]
    fn templates_match_only_within_their_variables() {
        let r = template("test://template/{id}/data", "id", "^[0-9]{1,6}$");
        assert!(r.matches("test://template/42/data"));
        assert!(!r.matches("test://template/abc/data"));
        assert!(!r.matches("test://template/1234567/data"));
        assert!(!r.matches("test://template/4/2/data"));
        assert!(!r.matches("test://template/42/data/x"));
        assert!(!r.matches("test://other/42/data"));
    }

    /// Proves template syntax outside simple `{name}` expansion is refused at load.
    #[test]
    fn only_simple_templates_load() {
        assert!(parse_template("a/{+path}").is_err());
        assert!(parse_template("a/{x}{y}").is_err());
        assert!(parse_template("a/{x").is_err());
        assert_eq!(
            parse_template("a/{x}/b").expect("parses"),
            vec![
                TemplatePart::Literal("a/".into()),
                TemplatePart::Variable("x".into()),
                TemplatePart::Literal("/b".into())
            ]
        );
    }
}
