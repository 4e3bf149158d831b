//! Narrowing: intersecting a contract's input schema with the upstream tool's own (SPEC §4.2).
//!
//! The schema algebra of `jsonschema::canonical` decides whether the upstream admits every value the
//! contract admits (the contract is *narrower*, the case operators want), whether the contract admits
//! values the upstream rejects (*wider*, reported with the path where it happens), or whether no value
//! satisfies both (*empty*: the tool is disabled). Whatever the algebra proves, calls are validated
//! against both schemas at run time, so an unproven case is still safe.

use serde_json::{Map, Value, json};

use super::schema::to_2020_12;

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
}

/// Intersects `contract` (2020-12, an object schema) with `upstream` (any supported draft).
pub fn narrow(contract: &Value, upstream: &Value) -> Narrowing {
    let upstream = to_2020_12(upstream);
    let verdict = decide(contract, &upstream);
    let published = match verdict {
        // Proven narrower: the contract itself is the intersection, with its own texts.
        Verdict::Narrower => publishable(contract),
        _ => intersection_schema(contract, &upstream),
    };
    Narrowing { verdict, published }
}

fn decide(contract: &Value, upstream: &Value) -> Verdict {
    let canon = |schema: &Value| {
        jsonschema::canonical::options()
            .offline()
            .canonicalize(&without_schema_keyword(schema))
    };
    let (c, u) = match (canon(contract), canon(upstream)) {
        (Ok(c), Ok(u)) => (c, u),
        (Err(e), _) | (_, Err(e)) => {
            return Verdict::Unproven {
                reason: e.to_string(),
            };
        }
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
            Verdict::Wider {
                path: if path.is_empty() { "/".into() } else { path },
            }
        }
        Ok(Containment::Unknown) => Verdict::Unproven {
            reason: "the schema algebra could not decide containment".into(),
        },
        Err(e) => Verdict::Unproven {
            reason: e.to_string(),
        },
    }
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

/// The contract as a published schema: 2020-12, no `$schema` (2020-12 is MCP's default dialect).
fn publishable(contract: &Value) -> Value {
    without_schema_keyword(contract)
}

/// The contract, with the upstream schema added as an `allOf` member: the intersection as one
/// self-contained object schema that keeps the contract's descriptions. The upstream's `$defs` are
/// moved to the root under a prefix so its references still resolve.
fn intersection_schema(contract: &Value, upstream: &Value) -> Value {
    let mut published = publishable(contract);
    let mut upstream = upstream.clone();
    let mut hoisted = Map::new();
    if let Value::Object(map) = &mut upstream
        && let Some(Value::Object(defs)) = map.remove("$defs")
    {
        for (name, def) in defs {
            hoisted.insert(format!("upstream.{name}"), def);
        }
    }
    rewrite_refs(&mut upstream);
    for def in hoisted.values_mut() {
        rewrite_refs(def);
    }
    if let Value::Object(map) = &mut published {
        if !hoisted.is_empty() {
            let defs = map.entry("$defs").or_insert_with(|| json!({}));
            if let Value::Object(defs) = defs {
                defs.extend(hoisted);
            }
        }
        let all_of = map.entry("allOf").or_insert_with(|| json!([]));
        if let Value::Array(items) = all_of {
            items.push(upstream);
        }
    }
    published
}

fn rewrite_refs(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref")
                && let Some(rest) = r.strip_prefix("#/$defs/")
            {
                *r = format!("#/$defs/upstream.{rest}");
            }
            map.values_mut().for_each(rewrite_refs);
        }
        Value::Array(items) => items.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::schema::{compile, first_violation};

    fn everything_weather() -> Value {
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"location": {"type": "string", "enum": ["New York", "Chicago", "Los Angeles"]}},
            "required": ["location"]
        })
    }

    fn contract(cities: Value) -> Value {
        json!({
            "type": "object",
            "properties": {"location": {"type": "string", "enum": cities, "description": "City name"}},
            "required": ["location"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_smaller_enum_is_proven_narrower_and_published_as_the_contract() {
        let n = narrow(
            &contract(json!(["Chicago", "New York"])),
            &everything_weather(),
        );
        assert_eq!(n.verdict, Verdict::Narrower);
        assert_eq!(
            n.published["properties"]["location"]["description"],
            "City name"
        );
        assert_eq!(n.published["additionalProperties"], json!(false));
    }

    #[test]
    fn a_disjoint_enum_is_empty() {
        let n = narrow(&contract(json!(["Paris"])), &everything_weather());
        assert_eq!(n.verdict, Verdict::Empty);
    }

    #[test]
    fn a_wider_enum_names_the_property_and_publishes_the_intersection() {
        let n = narrow(
            &contract(json!(["Chicago", "Paris"])),
            &everything_weather(),
        );
        assert_eq!(
            n.verdict,
            Verdict::Wider {
                path: "/properties/location".into()
            }
        );
        let published = compile(&n.published).expect("self-contained");
        assert!(first_violation(&published, &json!({"location": "Chicago"})).is_none());
        assert!(first_violation(&published, &json!({"location": "Paris"})).is_some());
    }

    #[test]
    fn upstream_definitions_still_resolve_inside_the_published_intersection() {
        let upstream = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "definitions": {"n": {"type": "integer", "maximum": 10}},
            "properties": {"n": {"$ref": "#/definitions/n"}}
        });
        let contract = json!({"type": "object", "properties": {"n": {"type": "number"}}});
        let n = narrow(&contract, &upstream);
        assert!(
            matches!(n.verdict, Verdict::Wider { .. } | Verdict::Unproven { .. }),
            "{:?}",
            n.verdict
        );
        let published = compile(&n.published).expect("refs resolve");
        assert!(first_violation(&published, &json!({"n": 5})).is_none());
        assert!(first_violation(&published, &json!({"n": 50})).is_some());
    }
}
