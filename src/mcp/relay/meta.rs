//! The `_meta` a client's `tools/call` carries, as forwarded upstream.
//!
//! A client's own keys reach the upstream (an upstream may read them: a request id, a locale, a
//! vendor's hints). Not forwarded: the gateway's namespace (`narrowgate/*`, which only the
//! gateway writes), the W3C trace context (`traceparent`, `tracestate`, `baggage`: the gateway's
//! CLIENT span sets its own), the MCP protocol's per-request keys (`io.modelcontextprotocol/*`:
//! they describe the client to the gateway, and the gateway's upstream session has its own), and
//! `progressToken` (the client's token means nothing on the upstream session, which all clients
//! share: the gateway gives the upstream a token of its own). What is forwarded is bounded
//! ([`MAX_FORWARDED_META_BYTES`]): a client must not make every upstream request arbitrarily large.

use rmcp::model::{ErrorData, RequestMetaObject};
use serde_json::Value;

/// The largest `_meta` forwarded upstream, as serialised JSON of the forwarded keys.
pub const MAX_FORWARDED_META_BYTES: usize = 8 * 1024;

/// Whether a client's `_meta` key is forwarded upstream (see the module's documentation).
pub fn forwarded_key(key: &str) -> bool {
    !(key.starts_with("narrowgate/")
        || key.starts_with("io.modelcontextprotocol/")
        || matches!(
            key,
            "traceparent" | "tracestate" | "baggage" | "progressToken"
        ))
}

/// The client's `_meta` as it goes upstream: `None` when no key is forwarded (the common case,
/// which allocates nothing), an error naming the bound when the forwarded keys exceed it.
pub fn forwarded(meta: &RequestMetaObject) -> Result<Option<RequestMetaObject>, ErrorData> {
    let fields = &meta.0.0;
    if !fields.keys().any(|k| forwarded_key(k)) {
        return Ok(None);
    }
    let mut size = Counter(2);
    for (key, value) in fields.iter().filter(|(k, _)| forwarded_key(k)) {
        // `"key":value,`
        size.0 += key.len() + 4;
        let _ = serde_json::to_writer(&mut size, value);
        if size.0 > MAX_FORWARDED_META_BYTES {
            return Err(too_large());
        }
    }
    let kept: serde_json::Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| forwarded_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(Some(RequestMetaObject(rmcp::model::MetaObject(kept))))
}

/// JSON-RPC -32602, saying what the bound is and which keys count against it.
fn too_large() -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "`_meta` is too large: the keys forwarded upstream (all but `narrowgate/*`, \
             `io.modelcontextprotocol/*`, `progressToken` and the trace context) may take at \
             most {MAX_FORWARDED_META_BYTES} bytes of JSON"
        ),
        None,
    )
}

/// Counts the bytes written to it, storing none.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> RequestMetaObject {
        serde_json::from_value(value).expect("a _meta object")
    }

    /// Proves: the client's own keys are forwarded, and the gateway's namespace, the trace
    /// context, the protocol's per-request keys and the progress token are not.
    #[test]
    fn only_the_clients_own_keys_are_forwarded() {
        let given = meta(json!({
            "com.example/request": "r-1", "locale": "fr",
            "narrowgate/replayed": true, "traceparent": "00-x", "tracestate": "a=b",
            "baggage": "k=v", "progressToken": 7,
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"
        }));
        let forwarded = forwarded(&given).expect("small").expect("some kept");
        assert_eq!(
            serde_json::to_value(&forwarded).expect("json"),
            json!({"com.example/request": "r-1", "locale": "fr"})
        );
    }

    /// Proves: a `_meta` with nothing to forward costs nothing (`None`), and forwarded keys
    /// beyond the bound are refused with an error naming it, while ignored keys do not count.
    #[test]
    fn nothing_to_forward_is_none_and_the_size_is_bounded() {
        assert!(
            forwarded(&meta(json!({"progressToken": 1})))
                .expect("ok")
                .is_none()
        );
        let big = "x".repeat(MAX_FORWARDED_META_BYTES);
        let error = forwarded(&meta(json!({"note": big}))).expect_err("too large");
        assert!(error.message.contains("8192 bytes"), "{}", error.message);
        assert!(forwarded(&meta(json!({"narrowgate/x": big, "ok": 1}))).is_ok());
    }
}
