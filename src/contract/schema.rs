//! JSON Schema handling shared by narrowing and validation: bringing upstream schemas written for
//! older drafts to 2020-12, compiling validators offline, and turning validation failures into
//! messages that name the path and the rule but never the offending value.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

use jsonschema::{Draft, ValidationError, Validator};
use serde_json::{Map, Value};

/// The dialect the gateway publishes and in which contracts are written.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Compiles a schema in the dialect it declares (2020-12 when it declares none), offline: a `$ref`
/// to a network URI is an error, as MCP 2026-07-28 requires.
///
/// Compiling is the dearest part of loading a contract (regular expressions, references), and
/// the same schema is compiled again and again: at load and once more when published, by every
/// tool of a server that shares one output schema, and by every reload of unchanged contracts.
/// So a validator still in use is handed out again for the same schema text ([`COMPILED`]).
pub fn compile(schema: &Value) -> Result<Arc<Validator>, String> {
    // serde_json's objects are ordered maps here: equal schemas print the same.
    let key = schema.to_string();
    let known = || COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(validator) = known().get(&key).and_then(Weak::upgrade) {
        return Ok(validator);
    }
    // Compiled outside the lock: others compiling meanwhile need not wait.
    let validator = compile_afresh(schema)?;
    let mut compiled = known();
    if compiled.len() >= 64 && compiled.len().is_power_of_two() {
        compiled.retain(|_, validator| validator.strong_count() > 0);
    }
    compiled.insert(key, Arc::downgrade(&validator));
    Ok(validator)
}

/// Validators by the text of the schema they were compiled from, held only while something
/// uses them (dead entries are swept as the map grows).
static COMPILED: LazyLock<Mutex<HashMap<String, Weak<Validator>>>> =
    LazyLock::new(Default::default);

fn compile_afresh(schema: &Value) -> Result<Arc<Validator>, String> {
    let draft = declared_draft(schema)?;
    // `format` is only an annotation by default in 2020-12; an operator who writes
    // `format: email` in a contract means it as a rule, so it is enforced in every dialect.
    jsonschema::options()
        .with_draft(draft)
        .should_validate_formats(true)
        .build(schema)
        .map(Arc::new)
        .map_err(|e| e.masked().to_string())
}

/// Checks a schema against the JSON Schema 2020-12 meta-schema (the crate's bundled copy), so a
/// contract typo in a value (`"type": "strng"`) is a load error rather than a validator that
/// accepts everything.
pub fn check_meta(schema: &Value) -> Result<(), String> {
    jsonschema::draft202012::meta::validate(schema).map_err(|e| {
        let at = e.instance_path().to_string();
        format!(
            "not a valid JSON Schema at `{}`: {}",
            display_pointer(&at),
            e.masked()
        )
    })
}

fn declared_draft(schema: &Value) -> Result<Draft, String> {
    match schema.get("$schema").and_then(Value::as_str) {
        None => Ok(Draft::Draft202012),
        Some(uri) => {
            let uri = uri.trim_end_matches('#');
            match uri
                .trim_start_matches("http://")
                .trim_start_matches("https://")
            {
                "json-schema.org/draft/2020-12/schema" => Ok(Draft::Draft202012),
                "json-schema.org/draft/2019-09/schema" => Ok(Draft::Draft201909),
                "json-schema.org/draft-07/schema" => Ok(Draft::Draft7),
                "json-schema.org/draft-06/schema" => Ok(Draft::Draft6),
                "json-schema.org/draft-04/schema" => Ok(Draft::Draft4),
                _ => Err(format!("unsupported JSON Schema dialect `{uri}`")),
            }
        }
    }
}

/// Rewrites a schema written for draft-04/06/07 or 2019-09 into 2020-12 form, so that it can be
/// combined with a 2020-12 contract (the schema algebra refuses operands of different drafts).
/// Keywords whose meaning changed are translated; `$schema` is removed.
pub fn to_2020_12(schema: &Value) -> Value {
    let mut out = schema.clone();
    if let Value::Object(map) = &mut out {
        map.remove("$schema");
    }
    translate(&mut out);
    out
}

fn translate(node: &mut Value) {
    let Value::Object(map) = node else {
        if let Value::Array(items) = node {
            items.iter_mut().for_each(translate);
        }
        return;
    };
    // `definitions` → `$defs`, with references into it rewritten below.
    if let Some(defs) = map.remove("definitions") {
        let target = map
            .entry("$defs")
            .or_insert_with(|| Value::Object(Map::new()));
        if let (Value::Object(target), Value::Object(defs)) = (target, defs) {
            for (k, v) in defs {
                target.entry(k).or_insert(v);
            }
        }
    }
    if let Some(Value::String(r)) = map.get_mut("$ref")
        && let Some(rest) = r.strip_prefix("#/definitions/")
    {
        *r = format!("#/$defs/{rest}");
    }
    // Array-form `items` → `prefixItems`; `additionalItems` → `items`.
    if matches!(map.get("items"), Some(Value::Array(_))) {
        if let Some(items) = map.remove("items") {
            map.insert("prefixItems".into(), items);
        }
        if let Some(additional) = map.remove("additionalItems") {
            map.insert("items".into(), additional);
        }
    } else {
        map.remove("additionalItems");
    }
    // `dependencies` → `dependentRequired` (arrays) and `dependentSchemas` (schemas).
    if let Some(Value::Object(deps)) = map.remove("dependencies") {
        let mut required = Map::new();
        let mut schemas = Map::new();
        for (k, v) in deps {
            if v.is_array() {
                required.insert(k, v);
            } else {
                schemas.insert(k, v);
            }
        }
        if !required.is_empty() {
            map.insert("dependentRequired".into(), Value::Object(required));
        }
        if !schemas.is_empty() {
            map.insert("dependentSchemas".into(), Value::Object(schemas));
        }
    }
    // draft-04 boolean exclusive bounds → numeric ones.
    for (flag, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(Value::Bool(exclusive)) = map.get(flag).cloned() {
            map.remove(flag);
            if exclusive && let Some(limit) = map.remove(bound) {
                map.insert(flag.into(), limit);
            }
        }
    }
    for value in map.values_mut() {
        translate(value);
    }
}

/// One validation failure, described without the value that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON Pointer to the failing value (`/location`), `/` for the whole document.
    pub path: String,
    /// The schema keyword that failed (`enum`, `required`, `additionalProperties`, ...).
    pub rule: String,
    /// JSON Pointer to the failing keyword in the schema (`/properties/location/enum`): a
    /// location in the schema's text, never in the data.
    pub schema_path: String,
    /// A masked, human-readable explanation.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "at {} violates `{}`: {}",
            self.path, self.rule, self.detail
        )
    }
}

/// Validates `instance` and describes the first failure, if any.
pub fn first_violation(validator: &Validator, instance: &Value) -> Option<Violation> {
    if validator.is_valid(instance) {
        return None;
    }
    validator.iter_errors(instance).next().map(|e| describe(&e))
}

fn describe(error: &ValidationError<'_>) -> Violation {
    let path = display_pointer(&error.instance_path().to_string()).to_string();
    let schema_path = error.schema_path().to_string();
    let rule = schema_path
        .rsplit('/')
        .find(|seg| !seg.is_empty() && seg.parse::<usize>().is_err())
        .unwrap_or("schema")
        .to_string();
    // `masked` replaces the instance with "value"; some messages still quote property names, which
    // are part of the schema, not of the caller's data.
    let detail = error.masked().to_string();
    Violation {
        path,
        rule,
        schema_path: display_pointer(&schema_path).to_string(),
        detail,
    }
}

fn display_pointer(pointer: &str) -> &str {
    if pointer.is_empty() { "/" } else { pointer }
}

// The shapes `narrowgate schema contract` gives the `input` and `output` keys.

/// `input`: a JSON Schema that must be `type: object` (the loader also checks it against the
/// 2020-12 meta-schema).
pub(super) fn input_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "required": ["type"],
        "properties": {"type": {"const": "object"}},
    })
}

/// `output`: any JSON Schema (an object, or a boolean).
pub(super) fn output_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": ["object", "boolean"]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Proves: a schema compiled while an earlier validator of the same text is alive gets that
    /// validator (no second compile), a different schema its own, and both still validate as
    /// their schema says.
    #[test]
    fn equal_schemas_share_one_validator_while_it_lives() {
        let schema = json!({"type": "object", "properties": {"q": {"type": "string", "pattern": "^[a-z]+$"}}});
        let first = compile(&schema).expect("compiles");
        let again = compile(&schema.clone()).expect("compiles");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same schema was compiled twice"
        );
        let other = compile(&json!({"type": "object", "properties": {"q": {"type": "integer"}}}))
            .expect("compiles");
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(again.is_valid(&json!({"q": "abc"})) && !again.is_valid(&json!({"q": "ABC"})));
        assert!(other.is_valid(&json!({"q": 1})) && !other.is_valid(&json!({"q": "abc"})));
    }

    #[test]
    fn draft07_keywords_are_translated_to_2020_12() {
        let upstream = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "definitions": {"city": {"type": "string"}},
            "properties": {
                "loc": {"$ref": "#/definitions/city"},
                "pair": {"type": "array", "items": [{"type": "string"}], "additionalItems": false},
            },
            "dependencies": {"a": ["b"], "c": {"required": ["d"]}}
        });
        let t = to_2020_12(&upstream);
        assert!(t.get("$schema").is_none());
        assert_eq!(t["$defs"]["city"], json!({"type": "string"}));
        assert_eq!(t["properties"]["loc"]["$ref"], "#/$defs/city");
        assert_eq!(
            t["properties"]["pair"]["prefixItems"],
            json!([{"type": "string"}])
        );
        assert_eq!(t["properties"]["pair"]["items"], json!(false));
        assert_eq!(t["dependentRequired"], json!({"a": ["b"]}));
        assert_eq!(t["dependentSchemas"], json!({"c": {"required": ["d"]}}));
        assert!(compile(&t).is_ok());
    }

    #[test]
    fn violations_name_path_and_rule_but_not_the_value() {
        let v = compile(&json!({
            "type": "object",
            "properties": {"city": {"enum": ["Chicago"]}},
            "required": ["city"],
            "additionalProperties": false
        }))
        .expect("compiles");
        let bad = first_violation(&v, &json!({"city": "SECRET-PARIS"})).expect("invalid");
        assert_eq!((bad.path.as_str(), bad.rule.as_str()), ("/city", "enum"));
        assert!(!bad.to_string().contains("SECRET-PARIS"), "{bad}");
        let missing = first_violation(&v, &json!({})).expect("invalid");
        assert_eq!(missing.rule, "required");
        let extra = first_violation(&v, &json!({"city": "Chicago", "zz": 1})).expect("invalid");
        assert_eq!(extra.rule, "additionalProperties");
        assert!(first_violation(&v, &json!({"city": "Chicago"})).is_none());
    }

    #[test]
    fn network_refs_are_refused_offline() {
        assert!(compile(&json!({"$ref": "https://example.com/schema.json"})).is_err());
    }
}
