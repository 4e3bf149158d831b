//! Canonical JSON and its SHA-256: the basis of `pin` digests of upstream tool definitions, contract
//! digests, argument digests (receipts) and dedupe keys.
//!
//! Equal JSON values always have equal digests, whatever their text looked like: object keys are
//! sorted (by their UTF-8 bytes), no whitespace is written, strings are written with the fewest
//! escapes (`"\u0041"` and `"A"` are one string), and numbers are written by value: `1`, `1.0`,
//! `1e0` and `-0` vs `0` are the same number, so a dedupe window catches a client that sends `1.0`
//! where it sent `1` before. An integral number within 64 bits is written as an integer, any
//! other as the shortest text that reads back as the same double.

use rmcp::model::Tool;
use serde_json::{Number, Value, json};
use sha2::{Digest, Sha256};

/// `sha256:<hex>` of the canonical JSON of `value`.
pub fn sha256_of(value: &Value) -> String {
    let mut hasher = Sha256::new();
    write_canonical(value, &mut |bytes| hasher.update(bytes));
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// Streams the canonical text of `value` to `out`, piece by piece (no copy of the whole text).
fn write_canonical(value: &Value, out: &mut dyn FnMut(&[u8])) {
    match value {
        Value::Null => out(b"null"),
        Value::Bool(true) => out(b"true"),
        Value::Bool(false) => out(b"false"),
        Value::Number(n) => out(canonical_number(n).as_bytes()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out(b",");
                }
                write_canonical(item, out);
            }
            out(b"]");
        }
        Value::Object(map) => {
            // serde_json's map is sorted unless a crate in the tree turns on `preserve_order`:
            // sort here so the digest never depends on that.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out(b"{");
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out(b",");
                }
                write_string(key, out);
                out(b":");
                write_canonical(item, out);
            }
            out(b"}");
        }
    }
}

/// A string as serde_json writes it: only `"`, `\` and control characters escaped.
fn write_string(s: &str, out: &mut dyn FnMut(&[u8])) {
    // Writing a `&str` to a Vec cannot fail.
    let text = serde_json::to_vec(s).unwrap_or_default();
    out(&text);
}

/// A number written by its value: integers (also integral doubles within 64 bits) in decimal,
/// other doubles in their shortest round-trip form.
fn canonical_number(n: &Number) -> String {
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    let Some(f) = n.as_f64() else {
        return n.to_string();
    };
    // 2^63 and 2^64 are exact doubles: the casts below are exact inside these bounds.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    if f.fract() == 0.0 {
        if (-TWO_63..TWO_63).contains(&f) {
            return (f as i64).to_string();
        }
        if (0.0..TWO_64).contains(&f) {
            return (f as u64).to_string();
        }
    }
    n.to_string()
}

/// The digest an operator pins: it covers what the upstream tells a model about the tool
/// (name, title, description, schemas, annotations), not transport details such as `_meta`.
pub fn tool_digest(tool: &Tool) -> String {
    let as_json = serde_json::to_value(tool).unwrap_or(Value::Null);
    let field = |k: &str| as_json.get(k).cloned().unwrap_or(Value::Null);
    sha256_of(&json!({
        "name": field("name"),
        "title": field("title"),
        "description": field("description"),
        "inputSchema": field("inputSchema"),
        "outputSchema": field("outputSchema"),
        "annotations": field("annotations"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("json")
    }

    /// The canonical JSON text of `value` (what [`sha256_of`] digests).
    fn canonical(value: &Value) -> String {
        let mut out = Vec::new();
        write_canonical(value, &mut |bytes| out.extend_from_slice(bytes));
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Proves: key order does not change a digest, an array's order does.
    #[test]
    fn digest_ignores_key_order_but_not_values() {
        let a = parse(r#"{"b":1,"a":[1,2]}"#);
        let b = parse(r#"{"a":[1,2],"b":1}"#);
        assert_eq!(sha256_of(&a), sha256_of(&b));
        assert_ne!(sha256_of(&a), sha256_of(&json!({"a": [2, 1], "b": 1})));
        assert!(sha256_of(&a).starts_with("sha256:"));
    }

    /// Proves: numbers are digested by value (`1`, `1.0`, `1e0`, `10e-1`; `-0` and `0`; large
    /// integral doubles and their integer spelling), while different values still differ.
    #[test]
    fn numbers_digest_by_value() {
        let same = [
            r#"{"n":1}"#,
            r#"{"n":1.0}"#,
            r#"{"n":1e0}"#,
            r#"{"n":10e-1}"#,
            r#"{"n":1.000}"#,
        ];
        for text in same {
            assert_eq!(
                sha256_of(&parse(text)),
                sha256_of(&json!({"n": 1})),
                "{text}"
            );
        }
        assert_eq!(canonical(&parse("-0.0")), "0");
        assert_eq!(canonical(&parse("-2.0")), "-2");
        assert_eq!(canonical(&parse("1e18")), "1000000000000000000");
        assert_eq!(
            canonical(&parse("1e19")),
            canonical(&parse("10000000000000000000"))
        );
        assert_eq!(canonical(&parse("1.5e0")), "1.5");
        assert_eq!(canonical(&parse("1e300")), canonical(&parse("1.0e300")));
        assert_ne!(sha256_of(&parse("1")), sha256_of(&parse("1.5")));
        assert_ne!(sha256_of(&parse("1")), sha256_of(&parse(r#""1""#)));
        assert_ne!(
            sha256_of(&parse("9007199254740993")),
            sha256_of(&parse("9007199254740992"))
        );
    }

    /// Proves: escapes that spell the same string digest alike, and nested keys are sorted too.
    #[test]
    fn strings_and_nested_objects_are_canonical() {
        let a = parse(r#"{"k":"\u0041\u00e9\/","o":{"z":[{"y":1,"x":2}],"a":null}}"#);
        let b = parse(r#"{"o":{"a":null,"z":[{"x":2.0,"y":1}]},"k":"Aé/"}"#);
        assert_eq!(sha256_of(&a), sha256_of(&b));
        assert_eq!(
            canonical(&a),
            r#"{"k":"Aé/","o":{"a":null,"z":[{"x":2,"y":1}]}}"#
        );
        assert_eq!(canonical(&json!("line\nbreak")), r#""line\nbreak""#);
    }
}
