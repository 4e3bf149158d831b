//! The JSON Schema 2020-12 keyword tables, and the walk over a schema's subschemas that both
//! contract loading and publishing need.
//!
//! Two uses, one table, so they cannot drift apart:
//! - a contract may only use keywords 2020-12 defines: any other key is ignored by validators, so
//!   a typo (`maxLenght: 3`) would silently drop the constraint and still be published. Loading
//!   refuses it and names the nearest known keyword ([`unknown_keywords`]);
//! - of an upstream's schema, only what validates is ever published ([`is_validation_keyword`]):
//!   its titles, descriptions, examples, comments and extension keys are text the upstream wrote
//!   for a model to read, and a gateway must not relay it.

use serde_json::Value;

/// Keywords whose value is one subschema.
pub const SCHEMA_VALUED: &[&str] = &[
    "items",
    "contains",
    "additionalProperties",
    "propertyNames",
    "if",
    "then",
    "else",
    "not",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];

/// Keywords whose value is an array of subschemas.
pub const ARRAY_OF_SCHEMAS: &[&str] = &["prefixItems", "allOf", "anyOf", "oneOf"];

/// Keywords whose value maps names (not keywords) to subschemas.
pub const MAP_OF_SCHEMAS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
];

/// Keywords that constrain values (validation vocabulary), whose value is data, not a schema.
const VALIDATION: &[&str] = &[
    "type",
    "const",
    "enum",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
];

/// Core keywords other than `$ref` and `$defs`, annotations and content keywords: part of
/// 2020-12 (so a contract may use them) but nothing a validator enforces.
const NON_VALIDATING: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$dynamicRef",
    "$vocabulary",
    "$comment",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "contentEncoding",
    "contentMediaType",
];

/// Extension keywords a contract may use: MCP's own (SEP-2243 maps an argument to an
/// `Mcp-Param-*` header, which clients act on). Any other `x-` key is refused like a typo:
/// nothing in the gateway reads it, and publishing it would be text no one checks.
const EXTENSIONS: &[&str] = &["x-mcp-header"];

/// The formats 2020-12 defines; the gateway enforces them (any other name would be ignored).
pub const FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Whether `key`, as a keyword of an upstream schema, may be published: it is a 2020-12
/// applicator, validation or format keyword (or `$ref`/`$defs`, which publishing rewrites).
pub fn is_validation_keyword(key: &str) -> bool {
    SCHEMA_VALUED.contains(&key) && key != "contentSchema"
        || ARRAY_OF_SCHEMAS.contains(&key)
        || MAP_OF_SCHEMAS.contains(&key)
        || VALIDATION.contains(&key)
        || key == "$ref"
        || key == "format"
}

/// Whether a contract may use `key`.
fn is_known_keyword(key: &str) -> bool {
    SCHEMA_VALUED.contains(&key)
        || ARRAY_OF_SCHEMAS.contains(&key)
        || MAP_OF_SCHEMAS.contains(&key)
        || VALIDATION.contains(&key)
        || NON_VALIDATING.contains(&key)
        || EXTENSIONS.contains(&key)
        || key == "$ref"
        || key == "format"
}

/// A key in a contract schema that 2020-12 does not define.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownKeyword {
    /// Dotted path from the schema's root to the key (`properties.name.maxLenght`).
    pub path: String,
    pub message: String,
}

/// Every key of `schema` (and its subschemas) that is not a 2020-12 keyword, and every
/// `format` that 2020-12 does not define, each with the nearest known name when one is close.
pub fn unknown_keywords(schema: &Value) -> Vec<UnknownKeyword> {
    let mut found = Vec::new();
    walk_contract(schema, "", &mut found);
    found
}

fn walk_contract(schema: &Value, at: &str, found: &mut Vec<UnknownKeyword>) {
    let Value::Object(map) = schema else { return };
    let join = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    for (key, value) in map {
        if !is_known_keyword(key) {
            found.push(UnknownKeyword {
                path: join(key),
                message: unknown_message(key),
            });
            continue;
        }
        if key == "format"
            && let Some(name) = value.as_str()
            && !FORMATS.contains(&name)
        {
            let hint = nearest(name, FORMATS)
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            found.push(UnknownKeyword {
                path: join(key),
                message: format!(
                    "unknown format `{name}`{hint}: JSON Schema 2020-12 defines {}; any other would be ignored",
                    FORMATS.join(", ")
                ),
            });
        }
        for_each_subschema(key, value, |suffix, sub| {
            walk_contract(sub, &join(&format!("{key}{suffix}")), found);
        });
    }
}

fn unknown_message(key: &str) -> String {
    let hint = match key {
        // Draft-07 names that 2020-12 renamed: the nearest spelling would not help.
        "definitions" => Some("$defs".to_string()),
        "dependencies" => Some("dependentRequired` or `dependentSchemas".to_string()),
        "additionalItems" => Some("items` (with `prefixItems`)".to_string()),
        _ => nearest(key, &all_keywords()).map(str::to_string),
    };
    let hint = hint
        .map(|h| format!(" (did you mean `{h}`?)"))
        .unwrap_or_default();
    format!(
        "unknown JSON Schema keyword `{key}`{hint}: contracts are JSON Schema 2020-12, where an unknown keyword is ignored and whatever it meant to constrain would be silently lost"
    )
}

fn all_keywords() -> Vec<&'static str> {
    [
        SCHEMA_VALUED,
        ARRAY_OF_SCHEMAS,
        MAP_OF_SCHEMAS,
        VALIDATION,
        NON_VALIDATING,
        EXTENSIONS,
        &["$ref", "format"],
    ]
    .concat()
}

/// Calls `visit(suffix, subschema)` for each subschema directly under keyword `key` (whose value
/// is `value`); `suffix` is `""`, `.N` or `.NAME`, to extend a dotted path.
pub fn for_each_subschema(key: &str, value: &Value, mut visit: impl FnMut(String, &Value)) {
    if SCHEMA_VALUED.contains(&key) {
        visit(String::new(), value);
    } else if ARRAY_OF_SCHEMAS.contains(&key) {
        if let Value::Array(items) = value {
            for (i, item) in items.iter().enumerate() {
                visit(format!(".{i}"), item);
            }
        }
    } else if MAP_OF_SCHEMAS.contains(&key)
        && let Value::Object(members) = value
    {
        for (name, member) in members {
            visit(format!(".{name}"), member);
        }
    }
}

/// Keeps, in `schema` and recursively in its subschemas, only the keys that `keep` accepts; the
/// values of data keywords (`enum`, `const`, `required`, ...) are kept as they are.
pub fn retain_keywords(schema: &mut Value, keep: &dyn Fn(&str) -> bool) {
    let Value::Object(map) = schema else { return };
    map.retain(|key, _| keep(key));
    for (key, value) in map.iter_mut() {
        if SCHEMA_VALUED.contains(&key.as_str()) {
            retain_keywords(value, keep);
        } else if ARRAY_OF_SCHEMAS.contains(&key.as_str()) {
            if let Value::Array(items) = value {
                items.iter_mut().for_each(|s| retain_keywords(s, keep));
            }
        } else if MAP_OF_SCHEMAS.contains(&key.as_str())
            && let Value::Object(members) = value
        {
            members.values_mut().for_each(|s| retain_keywords(s, keep));
        }
    }
}

/// `schema` made loadable as a contract (for `narrowgate init`, which copies an upstream's
/// schema): keys 2020-12 does not define, and formats it does not define, are removed at every
/// depth, since the loader would refuse them.
pub fn strip_unknown(schema: &mut Value) {
    retain_keywords(schema, &is_known_keyword);
    strip_unknown_formats(schema);
}

/// Removes, at every depth, `format`s that 2020-12 does not define: they validate nothing, and an
/// upstream's would be free text in what the gateway publishes.
pub fn strip_unknown_formats(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !FORMATS.contains(&f))
    {
        map.remove("format");
    }
    for (key, value) in map.iter_mut() {
        match value {
            Value::Array(items) if ARRAY_OF_SCHEMAS.contains(&key.as_str()) => {
                items.iter_mut().for_each(strip_unknown_formats);
            }
            Value::Object(members) if MAP_OF_SCHEMAS.contains(&key.as_str()) => {
                members.values_mut().for_each(strip_unknown_formats);
            }
            _ if SCHEMA_VALUED.contains(&key.as_str()) => strip_unknown_formats(value),
            _ => {}
        }
    }
}

/// The known name closest to `word` when it is close enough to be a misspelling of it: at most
/// one edit for short words, two for longer ones, three for long ones (optimal string alignment
/// distance, so a swapped pair of letters is one edit); case differences cost nothing extra.
fn nearest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let budget = match word.chars().count() {
        0..=4 => 1,
        5..=9 => 2,
        _ => 3,
    };
    known
        .iter()
        .map(|k| (osa_distance(&word.to_lowercase(), &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and transpositions
/// of adjacent characters each cost one.
fn osa_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Proves that misspelt keywords anywhere in a schema are found, with their dotted path and
    /// the keyword the operator meant, while property names and data values are not mistaken
    /// for keywords.
    #[test]
    fn misspelt_keywords_are_found_with_path_and_suggestion() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLenght": 3},
                "kind": {"enun": ["a", "b"]},
                "maxLenght": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string", "patern": "^a"}}
            },
            "$defs": {"x": {"minimun": 1}},
            "anyOf": [{"required": ["name"]}, {"requried": ["kind"]}],
            "default": {"enun": 1}
        });
        let found = unknown_keywords(&schema);
        let pairs: Vec<(&str, &str)> = found
            .iter()
            .map(|u| {
                let hint = u
                    .message
                    .split("did you mean `")
                    .nth(1)
                    .and_then(|s| s.split('`').next())
                    .unwrap_or("");
                (u.path.as_str(), hint)
            })
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("$defs.x.minimun", "minimum"),
                ("anyOf.1.requried", "required"),
                ("properties.kind.enun", "enum"),
                ("properties.name.maxLenght", "maxLength"),
                ("properties.tags.items.patern", "pattern"),
            ]
        );
    }

    /// Proves that extension keys are refused (except MCP's own `x-mcp-header`), that draft-07
    /// names point at their 2020-12 successors, and that unknown formats are refused too.
    #[test]
    fn extensions_draft07_names_and_formats() {
        let schema = json!({
            "type": "object",
            "x-secret-note": "hi",
            "definitions": {},
            "properties": {
                "h": {"type": "string", "x-mcp-header": "Region"},
                "e": {"type": "string", "format": "emial"},
                "d": {"type": "string", "format": "date-time"}
            }
        });
        let found = unknown_keywords(&schema);
        let paths: Vec<&str> = found.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(
            paths,
            vec!["definitions", "properties.e.format", "x-secret-note"]
        );
        assert!(found[0].message.contains("`$defs`"), "{}", found[0].message);
        assert!(found[1].message.contains("`email`"), "{}", found[1].message);
        assert!(unknown_keywords(&json!({"type": "object", "properties": {}})).is_empty());
    }

    /// Proves that retaining validation keywords drops annotations at every depth and keeps
    /// property names and data values.
    #[test]
    fn retaining_validation_keywords_strips_annotations_everywhere() {
        let mut schema = json!({
            "type": "object",
            "title": "T", "description": "D", "x-evil": "E", "$comment": "C",
            "properties": {"description": {"type": "string", "description": "D2", "enum": ["description"]}},
            "$defs": {"d": {"examples": ["E2"], "minimum": 1}},
            "items": {"default": 1, "type": "integer"},
            "anyOf": [{"title": "T3", "const": {"title": "kept: data"}}]
        });
        retain_keywords(&mut schema, &is_validation_keyword);
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {"description": {"type": "string", "enum": ["description"]}},
                "$defs": {"d": {"minimum": 1}},
                "items": {"type": "integer"},
                "anyOf": [{"const": {"title": "kept: data"}}]
            })
        );
    }

    /// Proves: a swapped pair of letters counts as one edit (so `maxLenght` finds `maxLength`),
    /// and a word far from every keyword gets no suggestion rather than a wrong one.
    #[test]
    fn osa_counts_a_transposition_as_one_edit() {
        assert_eq!(osa_distance("maxlenght", "maxlength"), 1);
        assert_eq!(osa_distance("enun", "enum"), 1);
        assert_eq!(nearest("zzzzzz", &all_keywords()), None);
    }
}
