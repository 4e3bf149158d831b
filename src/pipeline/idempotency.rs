//! Request identity: a client may name a `tools/call` with `_meta: {"narrowgate/idempotencyKey":
//! "K"}`. For the same caller, tool and key inside the window (the tool's `dedupe`, else 24 h) the
//! call is performed at most once. This module only reads and checks the key; keeping the promise
//! is the dedupe records' job (`crate::state::dedupe`), where the key replaces the arguments as the
//! call's identity. The key is never forwarded upstream (the gateway builds the upstream request
//! from the arguments alone) and never recorded in receipts.

use std::time::Duration;

use rmcp::model::RequestMetaObject;
use serde_json::Value;

/// The `_meta` key a client names a request with.
pub const META_KEY: &str = "narrowgate/idempotencyKey";

/// The longest key accepted, in characters.
pub const MAX_LEN: usize = 255;

/// How long a key names its request when the tool has no `dedupe` window.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// Why a key was refused: the tool error's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`_meta.{META_KEY}` must be a string of 1 to {MAX_LEN} printable ASCII characters \
     (letters, digits, punctuation, spaces); nothing was run"
)]
pub struct BadKey;

/// The request's idempotency key, if it sent one (checked).
pub fn key_of(meta: &RequestMetaObject) -> Result<Option<String>, BadKey> {
    match meta.0.0.get(META_KEY) {
        None => Ok(None),
        Some(Value::String(k)) if valid(k) => Ok(Some(k.clone())),
        Some(_) => Err(BadKey),
    }
}

/// 1 to [`MAX_LEN`] printable ASCII characters: a key travels in logs of clients and in Redis
/// key material, where control characters and look-alike Unicode have no business.
fn valid(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_LEN && key.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(value: Value) -> RequestMetaObject {
        let mut m = RequestMetaObject::default();
        m.0.0.insert(META_KEY.into(), value);
        m
    }

    /// Proves: a key of up to 255 printable characters is read; longer, empty, non-printable
    /// or non-string ones are refused; no key is no key.
    #[test]
    fn keys_are_checked() {
        assert_eq!(key_of(&RequestMetaObject::default()), Ok(None));
        assert_eq!(
            key_of(&meta(json!("order-42 retry"))),
            Ok(Some("order-42 retry".into()))
        );
        let longest = "k".repeat(MAX_LEN);
        assert_eq!(key_of(&meta(json!(longest))), Ok(Some(longest.clone())));
        for bad in [
            json!("k".repeat(MAX_LEN + 1)),
            json!(""),
            json!("tab\there"),
            json!("é"),
            json!(42),
        ] {
            assert_eq!(key_of(&meta(bad.clone())), Err(BadKey), "{bad}");
        }
    }
}
