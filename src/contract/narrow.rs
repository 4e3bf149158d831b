//! Narrowing: intersecting a contract's input schema with the upstream tool's own (docs/semantics.md).
//!
//! The schema algebra of `jsonschema::canonical` decides whether the upstream admits every value the
//! contract admits (the contract is *narrower*, the case operators want), whether the contract admits
//! values the upstream rejects (*wider*, reported with the path where it happens), or whether no value
//! satisfies both (*empty*: the tool is disabled). Whatever the algebra proves, calls are validated
//! against both schemas at run time, so an unproven case is still safe.

use serde_json::{Map, Value, json};

use super::publish::intersection_schema;
use super::schema::{compile, first_violation, to_2020_12};

/// What the algebra could establish about contract ∩ upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every value the contract admits, the upstream admits too.
    Narrower,
    /// The contract admits values the upstream rejects, first seen at this schema path.
    Wider { path: String },
    /// No value satisfies both: the tool must be disabled.
    Empty,
    /// The algebra could not decide (an unsupported keyword, say); both schemas are enforced.
    Unproven { reason: String },
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Narrower => f.write_str("proven narrower"),
            Verdict::Wider { path } => write!(f, "wider at {path}"),
            Verdict::Empty => f.write_str("empty: contract and upstream admit no common arguments"),
            Verdict::Unproven { reason } => write!(f, "not proven ({reason})"),
        }
    }
}

/// The result of narrowing one tool.
#[derive(Debug, Clone)]
pub struct Narrowing {
    pub verdict: Verdict,
    /// The self-contained 2020-12 object schema to publish as the tool's `inputSchema`.
    pub published: Value,
    /// Why the upstream's part of the intersection could not be published (then `published` is
    /// the contract alone; both schemas are still enforced on every call).
    pub upstream_omitted: Option<String>,
}

/// Intersects `contract` (2020-12, an object schema) with `upstream` (any supported draft).
pub fn narrow(contract: &Value, upstream: &Value) -> Narrowing {
    // A dialect either side declared is published (as 2020-12, the dialect of what is published:
    // the upstream's part is translated to it), so clients that read `$schema` still find one.
    let declared = [contract, upstream]
        .iter()
        .any(|schema| schema.get("$schema").is_some());
    let upstream = to_2020_12(upstream);
    let verdict = decide(contract, &upstream);
    let (published, upstream_omitted) = match verdict {
        // Proven narrower: the contract itself is the intersection, with its own texts.
        Verdict::Narrower => (publishable(contract), None),
        // Only the upstream's validation keywords join the contract (see `publish`).
        _ => match intersection_schema(&publishable(contract), &upstream) {
            Ok(published) => (published, None),
            Err(reason) => (publishable(contract), Some(reason)),
        },
    };
    let mut published = published;
    if declared && let Value::Object(map) = &mut published {
        map.insert(
            "$schema".to_string(),
            Value::String(super::schema::DRAFT_2020_12.to_string()),
        );
    }
    Narrowing {
        verdict,
        published,
        upstream_omitted,
    }
}

/// Compares a contract's `output` with the upstream's `outputSchema`. The same verdicts as for
/// inputs: `Narrower` (every result the contract admits, the upstream's schema admits too),
/// `Wider` (the contract admits results the upstream's schema rules out: they never arrive, so
/// this is only a contract that promises more than clients get), `Empty` (no result can satisfy
/// both: every call would be rejected, so the tool is disabled).
pub fn compare_output(contract: &Value, upstream: &Value) -> Verdict {
    decide(contract, &to_2020_12(upstream))
}

fn decide(contract: &Value, upstream: &Value) -> Verdict {
    let canon = |schema: &Value| {
        jsonschema::canonical::options()
            .offline()
            .canonicalize(&without_schema_keyword(schema))
    };
    // Where the algebra cannot decide, a concrete argument object that the contract accepts and
    // the upstream rejects still proves the contract wider (and names where).
    let unproven = |reason: String| match wider_witness(contract, upstream) {
        Some(path) => Verdict::Wider { path },
        None => Verdict::Unproven { reason },
    };
    let (c, u) = match (canon(contract), canon(upstream)) {
        (Ok(c), Ok(u)) => (c, u),
        (Err(e), _) | (_, Err(e)) => return unproven(e.to_string()),
    };
    use jsonschema::canonical::{Containment, Satisfiability};
    if let Ok(both) = c.intersect(&u)
        && both.satisfiability() == Satisfiability::No
    {
        return Verdict::Empty;
    }
    match u.covers(&c) {
        Ok(Containment::Yes) => Verdict::Narrower,
        Ok(Containment::No) => {
            let path = c
                .subtract(&u)
                .map(|diff| first_difference(&c.to_json_schema(), &diff.to_json_schema(), ""))
                .unwrap_or_default();
            // The algebra only tells apart properties; a witness can name `/required` or
            // `/additionalProperties` where it cannot.
            let path = if path.is_empty() {
                wider_witness(contract, upstream).unwrap_or_else(|| "/".into())
            } else {
                path
            };
            Verdict::Wider { path }
        }
        Ok(Containment::Unknown) => {
            unproven("the schema algebra could not decide containment".into())
        }
        Err(e) => unproven(e.to_string()),
    }
}

/// How deep [`candidates`] descends into nested objects and arrays, and how many argument
/// objects it tries at most: enough for tool arguments, bounded for pathological schemas.
const WITNESS_DEPTH: usize = 4;
const WITNESS_LIMIT: usize = 400;

/// Searches for arguments that `contract` accepts and `upstream` rejects, built from the
/// contract's own enums, bounds and properties. Returns the schema path (in the contract) of the
/// part that admits them. Sound by construction: every witness is validated against both schemas.
fn wider_witness(contract: &Value, upstream: &Value) -> Option<String> {
    let c = compile(contract).ok()?;
    let u = compile(upstream).ok()?;
    let mut tried = 0;
    for (instance, focus) in candidates(contract, contract, WITNESS_DEPTH) {
        tried += 1;
        if tried > WITNESS_LIMIT {
            break;
        }
        if c.is_valid(&instance)
            && let Some(violation) = first_violation(&u, &instance)
        {
            if !focus.is_empty() {
                return Some(focus);
            }
            // The object as a whole: name the object-level rule (`/required`) when it is one.
            return Some(match violation.rule.as_str() {
                rule @ ("required"
                | "additionalProperties"
                | "unevaluatedProperties"
                | "dependentRequired"
                | "minProperties"
                | "maxProperties"
                | "propertyNames") => format!("/{rule}"),
                _ => "/".into(),
            });
        }
    }
    None
}

/// Sample values for `schema`, each with the schema path (relative to `schema`) of the part that
/// was varied to produce it; `""` when the value exercises the schema as a whole.
fn candidates(schema: &Value, root: &Value, depth: usize) -> Vec<(Value, String)> {
    let schema = resolve(schema, root);
    let mut out: Vec<(Value, String)> = Vec::new();
    let Some(map) = schema.as_object() else {
        return vec![(json!("x"), String::new())];
    };
    if let Some(c) = map.get("const") {
        out.push((c.clone(), String::new()));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        out.extend(values.iter().map(|v| (v.clone(), String::new())));
    }
    for key in ["default", "examples"] {
        match map.get(key) {
            Some(Value::Array(values)) if key == "examples" => {
                out.extend(values.iter().map(|v| (v.clone(), String::new())));
            }
            Some(v) if key == "default" => out.push((v.clone(), String::new())),
            _ => {}
        }
    }
    // A member costs a level of depth too: a definition that refers to itself through
    // `anyOf` would otherwise recurse until the stack overflows (found by fuzz/).
    for branch in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(members)) = map.get(branch)
            && depth > 0
        {
            for (i, member) in members.iter().enumerate() {
                for (v, f) in candidates(member, root, depth - 1) {
                    out.push((v, format!("/{branch}/{i}{f}")));
                }
            }
        }
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if map.contains_key("properties") => vec!["object"],
        _ if map.contains_key("items") => vec!["array"],
        _ => vec!["string", "number", "boolean", "object", "null"],
    };
    let number = |key: &str| map.get(key).and_then(Value::as_f64);
    for t in types {
        match t {
            "string" => {
                out.push((json!("x"), String::new()));
                out.push((json!(""), String::new()));
                for key in ["minLength", "maxLength"] {
                    if let Some(n) = number(key).filter(|n| *n <= 4096.0) {
                        out.push((json!("x".repeat(n as usize)), String::new()));
                    }
                }
            }
            "integer" | "number" => {
                let mut values = vec![0.0, 1.0, -1.0, 1e9, -1e9];
                if t == "number" {
                    values.push(0.5);
                }
                for key in ["minimum", "maximum"] {
                    values.extend(number(key));
                }
                values.extend(number("exclusiveMinimum").map(|n| n.floor() + 1.0));
                values.extend(number("exclusiveMaximum").map(|n| n.ceil() - 1.0));
                values.extend(number("multipleOf"));
                // A fraction inside the bounds: a `number` whose bounds leave out 0.5 still
                // admits 1.5, which an upstream `integer` rejects.
                if t == "number" {
                    let low = number("minimum").or(number("exclusiveMinimum"));
                    let high = number("maximum").or(number("exclusiveMaximum"));
                    values.extend(low.map(|n| n.floor() + 0.5));
                    values.extend(high.map(|n| n.ceil() - 0.5));
                    if let (Some(low), Some(high)) = (low, high) {
                        values.push((low + high) / 2.0);
                    }
                }
                for n in values {
                    let v = if n.fract() == 0.0 && n.abs() < 9e15 {
                        json!(n as i64)
                    } else {
                        json!(n)
                    };
                    out.push((v, String::new()));
                }
            }
            "boolean" => {
                out.push((json!(true), String::new()));
                out.push((json!(false), String::new()));
            }
            "null" => out.push((Value::Null, String::new())),
            "array" if depth > 0 => out.extend(array_candidates(map, root, depth - 1)),
            "object" if depth > 0 => out.extend(object_candidates(map, root, depth - 1)),
            _ => {}
        }
    }
    out
}

fn array_candidates(map: &Map<String, Value>, root: &Value, depth: usize) -> Vec<(Value, String)> {
    let items = map.get("items").cloned().unwrap_or(json!({}));
    let min = map
        .get("minItems")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(16) as usize;
    let mut out = vec![(json!([]), String::new())];
    let inner = candidates(&items, root, depth);
    for (v, f) in &inner {
        out.push((
            Value::Array(vec![v.clone(); min.max(1)]),
            format!("/items{f}"),
        ));
    }
    if let Some(max) = map
        .get("maxItems")
        .and_then(Value::as_u64)
        .filter(|m| *m <= 64)
        && let Some((v, _)) = inner.first()
    {
        out.push((Value::Array(vec![v.clone(); max as usize]), String::new()));
    }
    out
}

fn object_candidates(map: &Map<String, Value>, root: &Value, depth: usize) -> Vec<(Value, String)> {
    let empty = Map::new();
    let properties = map
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let per_property: Vec<(&String, Vec<(Value, String)>)> = properties
        .iter()
        .map(|(name, sub)| (name, candidates(sub, root, depth)))
        .collect();
    // The base object holds every required property, each with a value its own schema accepts.
    let mut base = Map::new();
    for (name, values) in &per_property {
        if required.contains(&name.as_str()) {
            let sub = resolve(&properties[name.as_str()], root);
            let own = compile(&with_defs_of(sub, root)).ok();
            let pick = values
                .iter()
                .find(|(v, _)| own.as_ref().is_none_or(|s| s.is_valid(v)))
                .or(values.first());
            if let Some((v, _)) = pick {
                base.insert((*name).clone(), v.clone());
            }
        }
    }
    let mut out = vec![(Value::Object(base.clone()), String::new())];
    for (name, values) in &per_property {
        for (v, f) in values {
            let mut varied = base.clone();
            varied.insert((*name).clone(), v.clone());
            out.push((
                Value::Object(varied),
                format!("/properties/{}{f}", escape_pointer(name)),
            ));
        }
    }
    if map.get("additionalProperties") != Some(&Value::Bool(false)) {
        let mut extra = base;
        extra.insert("narrowgate_probe".into(), json!("x"));
        out.push((Value::Object(extra), "/additionalProperties".into()));
    }
    out
}

/// Follows a local `$ref` (`#/$defs/name`) once; other schemas are returned as they are.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix('#')
            .and_then(|pointer| root.pointer(pointer))
            .unwrap_or(schema),
        None => schema,
    }
}

/// `sub` as a standalone schema whose `#/$defs/...` references still resolve.
fn with_defs_of(sub: &Value, root: &Value) -> Value {
    let mut standalone = sub.clone();
    if let (Value::Object(map), Some(defs)) = (&mut standalone, root.get("$defs")) {
        map.entry("$defs").or_insert_with(|| defs.clone());
    }
    standalone
}

/// Finds the schema path where `diff` (contract minus upstream) departs from `contract`: the values
/// the contract admits beyond the upstream live under that property.
fn first_difference(contract: &Value, diff: &Value, at: &str) -> String {
    let (Some(cp), Some(dp)) = (
        contract.get("properties").and_then(Value::as_object),
        diff.get("properties").and_then(Value::as_object),
    ) else {
        return at.to_string();
    };
    for (name, sub) in dp {
        if cp.get(name) != Some(sub) {
            let here = format!("{at}/properties/{}", escape_pointer(name));
            return match cp.get(name) {
                Some(csub) => first_difference(csub, sub, &here),
                None => here,
            };
        }
    }
    at.to_string()
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

fn without_schema_keyword(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Value::Object(map) = &mut s {
        map.remove("$schema");
    }
    s
}

/// The contract as a published schema: 2020-12, `$schema` set by [`narrow`] only when declared.
fn publishable(contract: &Value) -> Value {
    without_schema_keyword(contract)
}

#[cfg(test)]
mod tests;
