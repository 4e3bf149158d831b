//! Fixed arguments (`fixed:` on a tool, docs/contracts.md): arguments the gateway sets on every
//! call, so that a model never chooses them. A git tool's `repo_path`, a ticket's `owner`: values
//! the operator decides, from constants, the environment (`${VAR}`, expanded when the file loads)
//! or the caller (`${caller.name}`, `${caller.roles}`, `${caller.claims.X}`, set per call).
//!
//! A fixed argument does not exist for clients: it is removed from the published `inputSchema`,
//! and a call that sends one is refused like any argument outside the contract. The upstream
//! receives it; receipts digest the arguments as sent upstream.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::schema::Violation;

/// The caller a fixed value may name.
pub struct Who<'a> {
    pub name: &'a str,
    pub roles: &'a [String],
    /// The verified token's claims (`Value::Null` for an API-key caller).
    pub claims: &'a Value,
}

/// One tool's fixed arguments, checked when the contract loads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fixed {
    /// By argument name, the value as written (after environment expansion).
    values: BTreeMap<String, Value>,
    /// Whether some value names the caller (else the arguments are the same on every call).
    per_caller: bool,
}

/// Why a fixed value could not be set for this caller: the call is refused, nothing is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fixed argument `{argument}` needs {needs}, which this caller's credentials do not carry")]
pub struct Unresolved {
    pub argument: String,
    pub needs: String,
}

/// The placeholders a fixed value may hold, besides `${VAR}` (gone by the time it is read).
const CALLER_PREFIX: &str = "${caller.";

impl Fixed {
    /// Checks `values` (the tool's `fixed:` map): every placeholder must be one this module
    /// knows. Errors carry a key suffix below the tool and a message.
    pub fn build(values: BTreeMap<String, Value>) -> Result<Fixed, (String, String)> {
        let mut per_caller = false;
        for (name, value) in &values {
            let mut problem = None;
            visit_strings(value, &mut |text| {
                for placeholder in placeholders(text) {
                    match Placeholder::parse(placeholder) {
                        Some(_) => per_caller = true,
                        None => {
                            problem.get_or_insert_with(|| {
                                format!(
                                    "`${{{placeholder}}}` is not a caller value: use ${{caller.name}}, ${{caller.roles}} or ${{caller.claims.NAME}}"
                                )
                            });
                        }
                    }
                }
            });
            if let Some(message) = problem {
                return Err((format!(".fixed.{name}"), message));
            }
        }
        Ok(Fixed { values, per_caller })
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The fixed argument names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// The values as written, for the contract's digest.
    pub fn written(&self) -> &BTreeMap<String, Value> {
        &self.values
    }

    /// `schema` (an object schema) without the fixed arguments: what a client may send, as the
    /// contract publishes it; and the upstream's schema as narrowing compares it, since the
    /// gateway, not the client, supplies those arguments.
    pub fn without_fixed(&self, schema: &Value) -> Value {
        let mut schema = schema.clone();
        if self.values.is_empty() {
            return schema;
        }
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.retain(|name, _| !self.values.contains_key(name));
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.retain(|name| name.as_str().is_none_or(|n| !self.values.contains_key(n)));
        }
        schema
    }

    /// The first fixed argument a client sent itself: such a call is refused as any argument
    /// outside the contract is.
    pub fn sent_by_client(&self, arguments: &Value) -> Option<Violation> {
        let sent = arguments.as_object()?;
        let name = self.values.keys().find(|name| sent.contains_key(*name))?;
        Some(Violation {
            path: "/".into(),
            rule: "additionalProperties".into(),
            schema_path: format!("/fixed/{name}"),
            detail: format!("`{name}` is not an argument of this tool (the gateway sets it)"),
        })
    }

    /// `arguments` with every fixed argument set for `who`.
    pub fn apply(&self, arguments: &mut Map<String, Value>, who: &Who) -> Result<(), Unresolved> {
        for (name, value) in &self.values {
            let value = match self.per_caller {
                false => value.clone(),
                true => resolve(value, who).map_err(|needs| Unresolved {
                    argument: name.clone(),
                    needs,
                })?,
            };
            arguments.insert(name.clone(), value);
        }
        Ok(())
    }
}

/// A caller value a fixed string may name.
#[derive(Debug, PartialEq, Eq)]
enum Placeholder<'a> {
    Name,
    Roles,
    Claim(&'a str),
}

impl<'a> Placeholder<'a> {
    /// Parses the text between `${` and `}`.
    fn parse(inner: &'a str) -> Option<Placeholder<'a>> {
        match inner.strip_prefix("caller.")? {
            "name" => Some(Placeholder::Name),
            "roles" => Some(Placeholder::Roles),
            rest => rest
                .strip_prefix("claims.")
                .filter(|c| !c.is_empty())
                .map(Placeholder::Claim),
        }
    }

    /// Its value for `who`: a JSON value when it is the whole string, else text to splice in.
    fn value(&self, who: &Who) -> Result<Value, String> {
        match self {
            Placeholder::Name => Ok(Value::String(who.name.to_string())),
            Placeholder::Roles => Ok(Value::Array(
                who.roles.iter().cloned().map(Value::String).collect(),
            )),
            Placeholder::Claim(path) => path
                .split('.')
                .try_fold(who.claims, |at, key| at.get(key))
                .filter(|v| !v.is_null())
                .cloned()
                .ok_or_else(|| format!("the token claim `{path}`")),
        }
    }
}

/// The `${caller.…}` placeholders in `text`, each without `${` and `}`.
fn placeholders(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices(CALLER_PREFIX).filter_map(|(at, _)| {
        let inner = &text[at + 2..];
        inner.find('}').map(|end| &inner[..end])
    })
}

/// `value` with every `${caller.…}` replaced: a string that is one placeholder becomes its value
/// (roles an array, a claim its JSON); inside a longer string, roles join with `,` and a claim
/// that is not a string is its JSON text.
fn resolve(value: &Value, who: &Who) -> Result<Value, String> {
    match value {
        Value::String(text) => {
            if let Some(inner) = text.strip_prefix("${").and_then(|t| t.strip_suffix('}'))
                && !inner.contains('}')
                && let Some(placeholder) = Placeholder::parse(inner)
            {
                return placeholder.value(who);
            }
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find(CALLER_PREFIX) {
                out.push_str(&rest[..at]);
                let inner = &rest[at + 2..];
                let Some(end) = inner.find('}') else { break };
                // `build` admitted only known placeholders.
                let Some(placeholder) = Placeholder::parse(&inner[..end]) else {
                    break;
                };
                match placeholder.value(who)? {
                    Value::String(s) => out.push_str(&s),
                    Value::Array(items) => {
                        let texts: Vec<String> = items.iter().map(text_of).collect();
                        out.push_str(&texts.join(","));
                    }
                    other => out.push_str(&text_of(&other)),
                }
                rest = &inner[end + 1..];
            }
            out.push_str(rest);
            Ok(Value::String(out))
        }
        Value::Array(items) => items.iter().map(|v| resolve(v, who)).collect(),
        Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| Ok((k.clone(), resolve(v, who)?)))
            .collect::<Result<Map<_, _>, String>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn visit_strings(value: &Value, visit: &mut dyn FnMut(&str)) {
    match value {
        Value::String(s) => visit(s),
        Value::Array(items) => items.iter().for_each(|v| visit_strings(v, visit)),
        Value::Object(fields) => fields.values().for_each(|v| visit_strings(v, visit)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fixed(values: Value) -> Fixed {
        let map = serde_json::from_value(values).expect("a map");
        Fixed::build(map).expect("valid")
    }

    fn alice<'a>(roles: &'a [String], claims: &'a Value) -> Who<'a> {
        Who {
            name: "alice",
            roles,
            claims,
        }
    }

    /// Proves: constants are set as written, caller values per call (a whole-string placeholder
    /// keeps its JSON type; inside text, roles join with commas), and a client's own value for
    /// another argument is kept.
    #[test]
    fn sets_constants_and_caller_values() {
        let f = fixed(json!({
            "repo_path": "/srv/repo",
            "owner": "${caller.name}",
            "teams": "${caller.roles}",
            "label": "by ${caller.name} (${caller.roles})",
            "tenant": "${caller.claims.org.id}",
            "limit": 5,
        }));
        let roles = vec!["dev".to_string(), "ops".to_string()];
        let claims = json!({"org": {"id": 42}});
        let mut args = json!({"message": "hi"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        f.apply(&mut args, &alice(&roles, &claims))
            .expect("resolved");
        assert_eq!(
            Value::Object(args),
            json!({
                "message": "hi", "repo_path": "/srv/repo", "owner": "alice",
                "teams": ["dev", "ops"], "label": "by alice (dev,ops)", "tenant": 42, "limit": 5,
            })
        );
    }

    /// Proves: a claim the caller's token lacks refuses the call with a message naming the
    /// argument and the claim (an API-key caller has no claims).
    #[test]
    fn a_missing_claim_is_an_error() {
        let f = fixed(json!({"tenant": "${caller.claims.org}"}));
        let mut args = Map::new();
        let error = f
            .apply(&mut args, &alice(&[], &Value::Null))
            .expect_err("no claims");
        assert_eq!(error.argument, "tenant");
        assert!(
            error.to_string().contains("the token claim `org`"),
            "{error}"
        );
    }

    /// Proves: an unknown `${caller.…}` placeholder is refused when the contract loads, at the
    /// argument's key.
    #[test]
    fn an_unknown_placeholder_is_refused_at_load() {
        let map = serde_json::from_value(json!({"owner": "${caller.email}"})).expect("map");
        let (key, message) = Fixed::build(map).expect_err("unknown");
        assert_eq!(key, ".fixed.owner");
        assert!(message.contains("${caller.email}"), "{message}");
    }

    /// Proves: the published schema and the upstream's (as narrowing sees it) lose the fixed
    /// argument from `properties` and `required`, and a client sending it is refused.
    #[test]
    fn removed_from_schemas_and_refused_when_sent() {
        let f = fixed(json!({"repo_path": "/srv/repo"}));
        let schema = json!({
            "type": "object",
            "properties": {"repo_path": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["repo_path", "n"],
        });
        assert_eq!(
            f.without_fixed(&schema),
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
        );
        let refused = f
            .sent_by_client(&json!({"n": 1, "repo_path": "/etc"}))
            .expect("refused");
        assert_eq!(refused.rule, "additionalProperties");
        assert!(f.sent_by_client(&json!({"n": 1})).is_none());
    }
}
