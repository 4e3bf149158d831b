//! Canonical JSON and its SHA-256: the basis of `pin` digests of upstream tool definitions, contract
//! digests, and argument digests. Keys are sorted (serde_json's map is ordered) and no whitespace
//! is emitted, so equal JSON values always have equal digests.

use rmcp::model::Tool;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// `sha256:<hex>` of the canonical JSON of `value`.
pub fn sha256_of(value: &Value) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(&bytes)))
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

    #[test]
    fn digest_ignores_key_order_but_not_values() {
        let a: Value = serde_json::from_str(r#"{"b":1,"a":[1,2]}"#).expect("json");
        let b: Value = serde_json::from_str(r#"{"a":[1,2],"b":1}"#).expect("json");
        assert_eq!(sha256_of(&a), sha256_of(&b));
        assert_ne!(sha256_of(&a), sha256_of(&json!({"a": [2, 1], "b": 1})));
        assert!(sha256_of(&a).starts_with("sha256:"));
    }
}
