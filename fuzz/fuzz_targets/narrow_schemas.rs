//! Narrowing (src/contract/narrow.rs): a contract's input schema against an upstream's.
//!
//! Input: bytes that generate two object schemas from a small JSON Schema grammar (types,
//! enums, consts, bounds, lengths, patterns, items, nested objects, `required`,
//! `additionalProperties`, `allOf`/`anyOf`/`not`, `$defs`/`$ref`), and argument objects
//! over a small domain of values those schemas talk about.
//! Checks: no panic; the published schema compiles; a value it accepts is accepted by both the
//! contract and the upstream; "proven narrower" means every value the contract accepts the
//! upstream accepts; "empty" means no value is accepted by both; "wider at P" is backed by a
//! value only when the schemas compile (no check: the witness search is bounded).
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use narrowgate::harness::{Verdict, narrow};
use narrowgate::harness::schema::compile;
use serde_json::{Map, Value, json};

const KEYS: [&str; 3] = ["a", "b", "c"];
const STRINGS: [&str; 6] = ["", "a", "ab", "b", "12", "abc"];
const PATTERNS: [&str; 4] = ["^a", "b$", "^[0-9]+$", "^$"];
const TYPES: [&str; 7] = [
    "string", "integer", "number", "boolean", "null", "array", "object",
];

fn scalar(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0..=5)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => json!(u.int_in_range(-3i64..=3)?),
        3 => json!(f64::from(u.int_in_range(-6i32..=6)?) / 2.0),
        _ => json!(*u.choose(&STRINGS)?),
    })
}

/// A value over the small domain, `depth` levels of arrays and objects at most.
fn value(u: &mut Unstructured, depth: u32) -> Result<Value> {
    if depth == 0 {
        return scalar(u);
    }
    Ok(match u.int_in_range(0..=4)? {
        0 => {
            let n = u.int_in_range(0..=3)?;
            Value::Array((0..n).map(|_| value(u, depth - 1)).collect::<Result<_>>()?)
        }
        1 | 2 => object(u, depth - 1)?,
        _ => scalar(u)?,
    })
}

fn object(u: &mut Unstructured, depth: u32) -> Result<Value> {
    let mut map = Map::new();
    for key in KEYS {
        if u.arbitrary()? {
            map.insert(key.to_string(), value(u, depth)?);
        }
    }
    Ok(Value::Object(map))
}

/// A schema, `depth` levels of nesting at most.
fn schema(u: &mut Unstructured, depth: u32) -> Result<Value> {
    let mut map = Map::new();
    let kind = u.int_in_range(0..=TYPES.len() + 1)?;
    if let Some(t) = TYPES.get(kind) {
        map.insert("type".into(), json!(t));
    } else if kind == TYPES.len() {
        map.insert("type".into(), json!([u.choose(&TYPES)?, u.choose(&TYPES)?]));
    }
    // A few keywords, each from a small set.
    for _ in 0..u.int_in_range(0..=3)? {
        match u.int_in_range(0..=13)? {
            0 => {
                let n = u.int_in_range(1..=3)?;
                let values = (0..n).map(|_| scalar(u)).collect::<Result<Vec<_>>>()?;
                map.insert("enum".into(), Value::Array(values));
            }
            1 => {
                map.insert("const".into(), scalar(u)?);
            }
            2 => {
                map.insert("minimum".into(), json!(u.int_in_range(-3i64..=3)?));
            }
            3 => {
                map.insert("maximum".into(), json!(u.int_in_range(-3i64..=3)?));
            }
            4 => {
                let k = *u.choose(&["exclusiveMinimum", "exclusiveMaximum", "multipleOf"])?;
                map.insert(k.into(), json!(u.int_in_range(1i64..=3)?));
            }
            5 => {
                let k = *u.choose(&["minLength", "maxLength", "minItems", "maxItems"])?;
                map.insert(k.into(), json!(u.int_in_range(0u64..=3)?));
            }
            6 => {
                map.insert("pattern".into(), json!(*u.choose(&PATTERNS)?));
            }
            7 if depth > 0 => {
                map.insert("items".into(), schema(u, depth - 1)?);
            }
            8 if depth > 0 => {
                let mut properties = Map::new();
                for key in KEYS {
                    if u.arbitrary()? {
                        properties.insert(key.to_string(), schema(u, depth - 1)?);
                    }
                }
                map.insert("properties".into(), Value::Object(properties));
            }
            9 => {
                let required: Vec<&str> = KEYS
                    .into_iter()
                    .filter(|_| u.arbitrary().unwrap_or(false))
                    .collect();
                map.insert("required".into(), json!(required));
            }
            10 => {
                let extra = if depth > 0 && u.arbitrary()? {
                    schema(u, depth - 1)?
                } else {
                    Value::Bool(u.arbitrary()?)
                };
                map.insert("additionalProperties".into(), extra);
            }
            11 if depth > 0 => {
                let k = *u.choose(&["allOf", "anyOf", "oneOf"])?;
                let n = u.int_in_range(1..=2)?;
                let members = (0..n)
                    .map(|_| schema(u, depth - 1))
                    .collect::<Result<Vec<_>>>()?;
                map.insert(k.into(), Value::Array(members));
            }
            12 if depth > 0 => {
                map.insert("not".into(), schema(u, depth - 1)?);
            }
            13 => {
                map.insert("$ref".into(), json!("#/$defs/d"));
            }
            _ => {}
        }
    }
    Ok(Value::Object(map))
}

/// An object schema, as contracts are (and upstream input schemas should be), with `$defs/d`
/// for the references inside it.
fn root(u: &mut Unstructured) -> Result<Value> {
    let mut root = schema(u, 2)?;
    if let Value::Object(map) = &mut root {
        map.insert("type".into(), json!("object"));
        map.remove("$ref");
        map.insert("$defs".into(), json!({"d": schema(u, 1)?}));
    }
    Ok(root)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let (Ok(contract), Ok(upstream)) = (root(&mut u), root(&mut u)) else {
        return;
    };
    let mut values = Vec::new();
    while let Ok(v) = object(&mut u, 2) {
        values.push(v);
        if values.len() == 8 || u.is_empty() {
            break;
        }
    }
    values.push(json!({}));
    let narrowing = narrow(&contract, &upstream);
    let (Ok(c), Ok(up)) = (compile(&contract), compile(&upstream)) else {
        return;
    };
    let published = match compile(&narrowing.published) {
        Ok(p) => p,
        Err(e) => panic!(
            "the published schema does not compile ({e}): {}",
            narrowing.published
        ),
    };
    let show = || {
        format!(
            "contract {contract}\nupstream {upstream}\npublished {}",
            narrowing.published
        )
    };
    for v in &values {
        let (in_c, in_u) = (c.is_valid(v), up.is_valid(v));
        if published.is_valid(v) {
            assert!(
                in_c && in_u,
                "published accepts {v}, contract {in_c}, upstream {in_u}\n{}",
                show()
            );
        }
        match &narrowing.verdict {
            Verdict::Narrower => assert!(
                !in_c || in_u,
                "proven narrower, yet the upstream rejects {v}\n{}",
                show()
            ),
            Verdict::Empty => assert!(!(in_c && in_u), "empty, yet both accept {v}\n{}", show()),
            Verdict::Wider { .. } | Verdict::Unproven { .. } => {}
        }
    }
});
