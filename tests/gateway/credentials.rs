//! What a client is told when its credential is refused: a bad key is told apart from a
//! missing one, so that clients (mcp-remote, the Inspector) do not take a wrong key for a
//! login to start (docs/clients.md shows what each then shows its user).

use super::common::{KEY, Raw};
use super::start_demo;

/// Proves: without OAuth, a request with a key the gateway does not know gets 401 with
/// `WWW-Authenticate: Bearer error="invalid_token"` and a body saying the key is not known;
/// one without credentials gets the plain `Bearer` challenge; the right key still works; and
/// the Dynamic Client Registration that OAuth clients (mcp-remote) try next is answered with a
/// body saying the gateway takes API keys, which they show in place of a bare 404.
#[tokio::test]
async fn a_bad_key_is_told_apart_from_a_missing_one() {
    let gw = start_demo("");
    let raw = Raw::new(&gw.url);
    let init = super::common::initialize_body("2025-11-25");

    let bad = raw
        .post(&[("authorization", "Bearer wrong-key")], &init)
        .await;
    assert_eq!(bad.status, 401, "{bad:?}");
    let challenge = bad.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\"")
            && challenge.contains("error_description=\"the key presented is not known"),
        "{challenge}"
    );
    let body: serde_json::Value = serde_json::from_str(&bad.body).expect("a JSON body");
    assert_eq!(body["error"], "invalid_token", "{body}");
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| d.contains("not known")),
        "{body}"
    );

    let missing = raw.post(&[], &init).await;
    assert_eq!(missing.status, 401, "{missing:?}");
    assert_eq!(
        missing.header("www-authenticate").as_deref(),
        Some("Bearer")
    );

    let good = raw
        .post(&[("authorization", &format!("Bearer {KEY}"))], &init)
        .await;
    assert_eq!(good.status, 200, "{good:?}");

    let register = Raw::new(&format!("{}/register", gw.base))
        .post(&[], r#"{"redirect_uris":["http://localhost:1/cb"]}"#)
        .await;
    assert_eq!(register.status, 404, "{register:?}");
    assert!(register.body.contains("API keys"), "{register:?}");
}
