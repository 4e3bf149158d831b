//! Reading one YAML file into a typed value, the same way for the configuration and the contracts.
//!
//! The file is first parsed into a plain JSON tree, `${VAR}` references in its strings are expanded
//! from the environment, and only then is the tree deserialized into the typed structure. Going
//! through the tree lets every error name the key it is about (`upstreams.files.comand: unknown
//! field`), which is what an operator needs to fix a typo.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a YAML file could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: cannot read: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not valid YAML: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("{path}: {key}: {message}")]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
}

impl LoadError {
    pub fn invalid(path: &Path, key: impl Into<String>, message: impl Into<String>) -> Self {
        LoadError::Invalid {
            path: path.to_path_buf(),
            key: key.into(),
            message: message.into(),
        }
    }
}

/// Reads `path`, expands `${VAR}` from the environment and deserializes it as `T`.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<T, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Like [`load`], from text already read; `path` is only used in messages.
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, LoadError> {
    parse_leaving(path, text, &|_| false).map(|(value, _)| value)
}

/// A `${VAR}` left unexpanded because it was unset where the command at hand does not look:
/// the key it is under (dotted) and the message it would have been an error with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub key: String,
    pub message: String,
}

/// Like [`parse`], but an unset variable under a key for which `may_leave(key)` holds is left
/// as written and returned, not an error: a command need not have the environment of the parts
/// it does not use. An error the text left there causes is reported as the unset variable.
pub fn parse_leaving<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    may_leave: &dyn Fn(&str) -> bool,
) -> Result<(T, Vec<Unresolved>), LoadError> {
    let mut tree: Value = serde_saphyr::from_str(text).map_err(|e| LoadError::Syntax {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if tree.is_null() {
        // An empty file is an empty mapping, so defaults apply and required keys are reported.
        tree = Value::Object(Default::default());
    }
    let mut left = Vec::new();
    expand_env_leaving(
        &mut tree,
        &mut Vec::new(),
        &|name| std::env::var(name).ok(),
        may_leave,
        &mut left,
    )
    .map_err(|(key, message)| LoadError::invalid(path, key, message))?;
    let value = serde_path_to_error::deserialize(tree).map_err(|e| {
        let key = e.path().to_string();
        if let Some(u) = left.iter().find(|u| is_under(&dotted(&key), &u.key)) {
            return LoadError::invalid(path, u.key.clone(), u.message.clone());
        }
        let key = if key == "." {
            "(top level)".to_string()
        } else {
            key
        };
        LoadError::invalid(path, key, e.into_inner().to_string())
    })?;
    Ok((value, left))
}

/// `a.b[0].c` (serde_path_to_error's form) as `a.b.0.c` (the form keys are reported in here).
fn dotted(key: &str) -> String {
    key.replace('[', ".").replace(']', "")
}

/// Whether `key` is `parent` or a key below it (both dotted).
pub fn is_under(key: &str, parent: &str) -> bool {
    key == parent
        || key
            .strip_prefix(parent)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// [`expand_env`], leaving unset variables under keys `may_leave` admits (recorded in `left`).
fn expand_env_leaving(
    tree: &mut Value,
    key: &mut Vec<String>,
    lookup: &dyn Fn(&str) -> Option<String>,
    may_leave: &dyn Fn(&str) -> bool,
    left: &mut Vec<Unresolved>,
) -> Result<(), (String, String)> {
    match tree {
        Value::String(s) if s.contains('$') => match expand_string(s, lookup) {
            Ok(expanded) => *s = expanded,
            Err(message) => {
                let at = key.join(".");
                if message.ends_with("is not set") && may_leave(&at) {
                    left.push(Unresolved { key: at, message });
                } else {
                    return Err((at, message));
                }
            }
        },
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                key.push(i.to_string());
                expand_env_leaving(item, key, lookup, may_leave, left)?;
                key.pop();
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                key.push(k.clone());
                expand_env_leaving(v, key, lookup, may_leave, left)?;
                key.pop();
            }
        }
        _ => {}
    }
    Ok(())
}

/// Replaces `${VAR}` in every string of `tree`; `$$` stands for a literal `$`.
/// Returns the key path and a message for the first unset variable.
#[cfg(test)]
fn expand_env(
    tree: &mut Value,
    key: &mut Vec<String>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), (String, String)> {
    expand_env_leaving(tree, key, lookup, &|_| false, &mut Vec::new())
}

fn expand_string(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| format!("unterminated `${{` in `{text}`"))?;
            let name = &body[..end];
            // `${caller.name}` and the like are set per call (contract `fixed:`), not here.
            if name.starts_with("caller.") {
                out.push_str(&rest[at..at + end + 3]);
                rest = &body[end + 1..];
                continue;
            }
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "`${{{name}}}` is not a valid environment variable name"
                ));
            }
            let value =
                lookup(name).ok_or_else(|| format!("environment variable {name} is not set"))?;
            out.push_str(&value);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cret".to_string())
    }

    #[test]
    fn expands_set_variables_and_names_the_key_of_an_unset_one() {
        let mut tree = json!({"a": {"b": ["x ${TOKEN} y", "$$HOME", "cost $5"]}});
        expand_env(&mut tree, &mut Vec::new(), &env).expect("expands");
        assert_eq!(
            tree,
            json!({"a": {"b": ["x s3cret y", "$HOME", "cost $5"]}})
        );
        // Caller values are the gateway's to set per call (`fixed:`): kept as written.
        let mut tree = json!({"owner": "${caller.name}/${TOKEN}"});
        expand_env(&mut tree, &mut Vec::new(), &env).expect("expands");
        assert_eq!(tree, json!({"owner": "${caller.name}/s3cret"}));

        let mut tree = json!({"up": {"headers": {"auth": "Bearer ${MISSING}"}}});
        let (key, message) = expand_env(&mut tree, &mut Vec::new(), &env).unwrap_err();
        assert_eq!(key, "up.headers.auth");
        assert_eq!(message, "environment variable MISSING is not set");
    }

    #[test]
    fn rejects_malformed_references() {
        assert!(expand_string("${", &env).is_err());
        assert!(expand_string("${A-B}", &env).is_err());
    }
}
