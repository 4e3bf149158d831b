//! Identity and limits (`oauth`, scopes, roles, rate limits) against the real binary: JWTs
//! signed here with generated RSA, EC and Ed25519 keys (served from a JWKS file and a JWKS
//! endpoint on loopback), the bad-token catalogue, RFC 9728 metadata and challenges, the step-up
//! 403 (raw and through the official Python SDK), roles, API keys beside tokens, and rate limits
//! in memory and shared by two gateways through a real `redis-server` (in identity/limits.rs).

use crate::common;
#[path = "identity/limits.rs"]
mod limits;
#[path = "identity/step_up.rs"]
mod step_up;
#[path = "identity/support.rs"]
mod support;

use common::{
    BOB, CAROL, Gateway, HttpUpstream, KEY, Raw, contract_file, echo_tool, hash_key, http_get,
    result_text, sorted_tool_names,
};
use serde_json::{Value, json};
use support::{
    AUDIENCE, JwksServer, Signer, assert_challenge, claims, hs256, jwks, keys, unsigned,
};

const V: &str = "2025-11-25";

/// echo, limited_echo (echo at 2 calls a minute), get_weather (scope `weather:read`), counter
/// and whoami.
fn contracts() -> String {
    contract_file(
        "demo",
        &[
            &echo_tool("echo", 50, ""),
            &echo_tool("limited_echo", 50, "    rate: 2/m\n"),
            CONTRACTS_REST,
        ],
    )
}

const CONTRACTS_REST: &str = r#"  get_weather:
    upstream_tool: weather
    privilege: read
    scopes: [weather:read]
    input:
      type: object
      properties: { location: { type: string, enum: [Chicago, New York] } }
      required: [location]
      additionalProperties: false
  counter:
    privilege: write
    input: { type: object, additionalProperties: false }
  whoami:
    privilege: read
    input: { type: object, additionalProperties: false }
"#;

/// The config for `upstream`, with `jwks` (`jwks_file: …` or `jwks_url: …`) and `extra` lines.
fn config(upstream: &str, jwks: &str, extra: &str) -> String {
    format!(
        r#"public_url: {AUDIENCE}
upstreams:
  demo:
    url: {upstream}
    headers: {{ Authorization: "Bearer upstream-secret" }}
callers:
  - name: alice
    api_key_sha256: {alice}
    tools: ['*']
    scopes: [weather:read]
  - name: bob
    api_key_sha256: {bob}
    tools: ['*']
  - name: carol
    api_key_sha256: {carol}
    tools: ['*']
    rate: 1/m burst 3
oauth:
  issuer: https://idp.test
  {jwks}
  authorization_servers: [https://as.test]
  roles_claim: groups
  roles:
    default: {{ tools: [echo, whoami] }}
    weather: {{ tools: [get_weather] }}
    ops: {{ tools: ['*'], rate: 1/m burst 2 }}
{extra}"#,
        alice = hash_key(KEY),
        bob = hash_key(BOB),
        carol = hash_key(CAROL),
    )
}

/// A gateway whose issuer keys are the RSA, EC and Ed25519 test keys, from a JWKS file.
fn start_with_file(upstream: &HttpUpstream, extra: &str) -> (Gateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    let k = keys();
    std::fs::write(&path, jwks(&[&k.rsa, &k.ec, &k.ed])).expect("write jwks");
    let jwks = format!("jwks_file: {}", path.display());
    let gw = Gateway::start(
        &config(&upstream.url, &jwks, extra),
        &[("demo.yaml", contracts().as_str())],
    );
    (gw, dir)
}

fn token(signer: &Signer, sub: &str, extra: Value) -> String {
    signer.sign(&claims(sub, extra))
}

/// `tools/call` in `session` with `credential` (an API key or a token).
async fn call(
    raw: &Raw,
    credential: &str,
    session: &str,
    tool: &str,
    args: Value,
) -> common::Reply {
    raw.request(
        Some(credential),
        session,
        V,
        "tools/call",
        json!({"name": tool, "arguments": args}),
    )
    .await
}

/// The tool names `tools/list` shows to `credential`.
async fn listed(raw: &Raw, credential: &str) -> Vec<String> {
    let session = raw.open_session(Some(credential), V).await;
    let reply = raw
        .request(Some(credential), &session, V, "tools/list", json!({}))
        .await;
    sorted_tool_names(&reply.message()["result"])
}

/// Calls `tool` once in a fresh session; returns the JSON-RPC message.
async fn call_once(raw: &Raw, credential: &str, tool: &str, args: Value) -> Value {
    let session = raw.open_session(Some(credential), V).await;
    let reply = call(raw, credential, &session, tool, args).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.message()
}

/// The upstream's process-wide counter after one more call (by alice, who has no limits).
async fn counter(raw: &Raw) -> u64 {
    let message = call_once(raw, KEY, "counter", json!({})).await;
    message["result"]["structuredContent"]["count"]
        .as_u64()
        .unwrap_or_else(|| panic!("no count in {message}"))
}

/// Proves: tokens signed with RSA (RS256), EC (ES256) and Ed25519 (EdDSA) keys from a JWKS file
/// are accepted; roles decide the tools listed and callable (`default` for every token, one
/// decision for both); API keys keep working beside tokens.
#[tokio::test]
async fn tokens_from_a_jwks_file_authenticate_and_roles_decide_the_tools() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "");
    let raw = Raw::new(&gw.url);
    let k = keys();
    for signer in [&k.rsa, &k.ec, &k.ed] {
        let t = token(
            signer,
            "weather-user",
            json!({"groups": ["weather"], "scope": "weather:read"}),
        );
        assert_eq!(
            listed(&raw, &t).await,
            ["echo", "get_weather", "whoami"],
            "{}",
            signer.alg
        );
        let message = call_once(&raw, &t, "get_weather", json!({"location": "Chicago"})).await;
        assert_eq!(
            message["result"]["isError"],
            json!(false),
            "{}: {message}",
            signer.alg
        );
    }
    let plain = token(&k.ec, "plain-user", json!({}));
    assert_eq!(listed(&raw, &plain).await, ["echo", "whoami"]);
    let message = call_once(&raw, &plain, "counter", json!({})).await;
    assert_eq!(message["error"]["code"], -32602, "{message}");
    assert!(
        message["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("Unknown tool: counter")
    );
    // A string-valued roles claim works too.
    let ops = token(&k.ed, "ops-user", json!({"groups": "ops"}));
    assert_eq!(listed(&raw, &ops).await.len(), 5);
    // API keys beside tokens.
    assert_eq!(listed(&raw, KEY).await.len(), 5);
}

/// Proves: every token of the bad-token catalogue is refused with 401, an `invalid_token`
/// challenge naming the metadata, and nothing reaches the upstream (its counter moved only for
/// the one good call).
#[tokio::test]
async fn bad_tokens_are_refused_with_401_and_nothing_is_forwarded() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "");
    let raw = Raw::new(&gw.url);
    let k = keys();
    let ops = json!({"groups": ["ops"]});
    let good = token(&k.rsa, "mallory", ops.clone());
    let session = raw.open_session(Some(&good), V).await;
    let mut tampered: Vec<&str> = good.split('.').collect();
    let admin_payload = support_b64(&claims("admin", ops.clone()).to_string());
    tampered[1] = &admin_payload;
    let catalogue = [
        (
            "expired",
            token(
                &k.rsa,
                "mallory",
                json!({"groups": ["ops"], "exp": support::now() - 600}),
            ),
        ),
        (
            "not yet valid",
            token(
                &k.rsa,
                "mallory",
                json!({"groups": ["ops"], "nbf": support::now() + 600}),
            ),
        ),
        (
            "wrong aud",
            token(
                &k.rsa,
                "mallory",
                json!({"groups": ["ops"], "aud": "https://other.test/mcp"}),
            ),
        ),
        (
            "wrong iss",
            token(
                &k.rsa,
                "mallory",
                json!({"groups": ["ops"], "iss": "https://evil.test"}),
            ),
        ),
        (
            "no exp",
            token(&k.rsa, "mallory", json!({"groups": ["ops"], "exp": null})),
        ),
        (
            "no caller claim",
            token(&k.rsa, "mallory", json!({"groups": ["ops"], "sub": null})),
        ),
        ("alg none", unsigned(&claims("mallory", ops.clone()))),
        (
            "HS256 keyed with the public JWK",
            hs256(
                "rsa-1",
                k.rsa.jwk.to_string().as_bytes(),
                &claims("mallory", ops.clone()),
            ),
        ),
        (
            "HS256 keyed with the modulus",
            hs256(
                "rsa-1",
                k.rsa.jwk["n"].as_str().unwrap_or("").as_bytes(),
                &claims("mallory", ops.clone()),
            ),
        ),
        (
            "bad signature",
            k.rotated.sign_with_header(
                &json!({"alg": "RS256", "kid": "rsa-1"}),
                &claims("mallory", ops.clone()),
            ),
        ),
        ("tampered payload", tampered.join(".")),
        ("unknown kid", token(&k.rotated, "mallory", ops.clone())),
        (
            "EC token claiming an RSA kid",
            k.ec.sign_with_header(
                &json!({"alg": "ES256", "kid": "rsa-1"}),
                &claims("mallory", ops.clone()),
            ),
        ),
        (
            "malformed",
            "eyJhbGciOiJSUzI1NiJ9.not-base64!.x".to_string(),
        ),
        ("not a JWT", "not-a-jwt-and-no-key".to_string()),
        (
            "a valid token whose subject is an API-key caller's name",
            token(&k.rsa, "alice", ops.clone()),
        ),
    ];
    for (what, bad) in &catalogue {
        let reply = call(&raw, bad, &session, "counter", json!({})).await;
        assert_eq!(reply.status, 401, "{what}: {reply:?}");
        assert_challenge(&reply, "Bearer error=\"invalid_token\"", what);
    }
    // A token named like an API-key caller cannot use that caller's session (nor its limits).
    let alices_session = raw.open_session(Some(KEY), V).await;
    let as_alice = token(&k.rsa, "alice", ops.clone());
    let hijack = call(&raw, &as_alice, &alices_session, "counter", json!({})).await;
    assert_eq!(hijack.status, 401, "{hijack:?}");
    let expired = call(&raw, &catalogue[0].1, &session, "counter", json!({})).await;
    assert!(
        expired.body.contains("the token has expired"),
        "{expired:?}"
    );
    assert_eq!(
        counter(&raw).await,
        1,
        "only alice's own counter call reached the upstream"
    );
    let log = gw.log();
    assert!(
        log.contains("the token has expired")
            && log.contains("\"none\" is not accepted")
            && log.contains("which is a caller of the configuration"),
        "{log}"
    );
    assert!(
        !log.contains(&good) && !log.contains(KEY),
        "credentials must never be logged"
    );
}

fn support_b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// Proves: keys from a JWKS endpoint are fetched once and cached; a token with a new `kid` makes
/// the gateway refetch (key rotation), and a stream of unknown `kid`s does not refetch again
/// within the floor.
#[tokio::test]
async fn jwks_from_an_endpoint_is_cached_and_refetched_for_rotated_keys() {
    let k = keys();
    let server = JwksServer::start(jwks(&[&k.rsa]));
    let upstream = HttpUpstream::start(&[]);
    let jwks_line = format!("jwks_url: {}", server.url);
    let gw = Gateway::start(
        &config(&upstream.url, &jwks_line, ""),
        &[("demo.yaml", contracts().as_str())],
    );
    let raw = Raw::new(&gw.url);
    assert_eq!(
        listed(&raw, &token(&k.rsa, "u1", json!({}))).await,
        ["echo", "whoami"]
    );
    assert_eq!(listed(&raw, &token(&k.rsa, "u2", json!({}))).await.len(), 2);
    assert_eq!(server.hits(), 1, "the key set is cached");

    server.serve(jwks(&[&k.rsa, &k.rotated]));
    assert_eq!(
        listed(&raw, &token(&k.rotated, "u3", json!({})))
            .await
            .len(),
        2
    );
    assert_eq!(server.hits(), 2, "an unknown kid refetched the key set");

    let init = common::initialize_body(V);
    for i in 0..5 {
        let stranger = Signer::ec(&format!("unknown-{i}"));
        let bearer = format!("Bearer {}", token(&stranger, "u4", json!({})));
        let reply = raw.post(&[("authorization", &bearer)], &init).await;
        assert_eq!(reply.status, 401, "{reply:?}");
    }
    assert_eq!(
        server.hits(),
        2,
        "unknown kids within the floor do not refetch"
    );
}

/// Proves: RFC 9728 metadata is served at both well-known paths with oauth set (404 without), and
/// a 401 without credentials carries `resource_metadata` and `scope`.
#[tokio::test]
async fn protected_resource_metadata_and_the_401_challenge() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "");
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let (status, body) = http_get(&gw.base, path).expect("metadata answers");
        assert_eq!(status, 200, "{path}: {body}");
        let doc: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(doc["resource"], AUDIENCE);
        assert_eq!(doc["authorization_servers"], json!(["https://as.test"]));
        assert_eq!(doc["scopes_supported"], json!(["weather:read"]));
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
    }
    let raw = Raw::new(&gw.url);
    let reply = raw
        .post(&[], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("www-authenticate").as_deref(),
        Some(
            "Bearer resource_metadata=\"https://gw.test/.well-known/oauth-protected-resource/mcp\", scope=\"weather:read\""
        )
    );

    let plain = Gateway::start(
        &format!(
            "upstreams:\n  demo:\n    url: {}\ncallers:\n  - name: a\n    api_key_sha256: {}\n    tools: ['*']\n",
            upstream.url,
            hash_key(KEY)
        ),
        &[("demo.yaml", contracts().as_str())],
    );
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        assert_eq!(
            http_get(&plain.base, path).map(|r| r.0),
            Some(404),
            "{path}"
        );
    }
    let reply = Raw::new(&plain.url)
        .post(&[], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .await;
    assert_eq!(reply.header("www-authenticate").as_deref(), Some("Bearer"));
}

/// Proves: the caller's token (JWT or API key) never reaches the upstream: it receives only the
/// gateway's own configured credential.
#[tokio::test]
async fn the_callers_token_never_reaches_the_upstream() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "");
    let raw = Raw::new(&gw.url);
    let jwt = token(&keys().rsa, "secret-holder", json!({}));
    for credential in [jwt.as_str(), KEY] {
        let message = call_once(&raw, credential, "whoami", json!({})).await;
        let text = result_text(&message["result"]);
        let headers: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{message}"));
        assert_eq!(
            headers["authorization"], "Bearer upstream-secret",
            "{headers}"
        );
        assert!(
            !text.contains(credential),
            "the caller's credential leaked upstream: {text}"
        );
    }
}
