//! `_meta`, same-origin, version negotiation and `cacheScope` through the gateway.

use serde_json::{Value, json};

use crate::common::{Gateway, KEY, Raw, callers, upstream::HttpUpstream};

/// The demo upstream over Streamable HTTP as `demo` (so calls take the gateway's forwarder),
/// with `echo_meta` under contract and `extra` config lines.
pub fn gateway_on_http(upstream: &HttpUpstream, tools: &str, extra: &str) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}{extra}",
        upstream.url,
        callers(&[])
    );
    let contract = format!("upstream: demo\ntools:\n{tools}");
    let gateway = Gateway::start(&config, &[("demo.yaml", &contract)]);
    gateway.wait_tools_joined("demo", &[]);
    gateway
}

pub const ECHO_META: &str = "  echo_meta:\n    privilege: read\n    input: { type: object, properties: {}, additionalProperties: false }\n";

/// Proves: a client's own `_meta` keys reach the upstream, on both entry paths (a session's
/// plain call, answered by the gateway's direct path, and one rmcp serves because it carries a
/// progress token); the gateway's namespace, the client's trace context and progress token do
/// not; a `_meta` beyond 8 KiB is refused with an error naming the bound. Fails without the
/// forwarding (the upstream saw no client key).
#[tokio::test]
async fn the_clients_meta_reaches_the_upstream_but_not_the_gateways_keys() {
    let upstream = HttpUpstream::start(&[]);
    let gateway = gateway_on_http(&upstream, ECHO_META, "");
    let raw = Raw::new(&gateway.url);
    let session = raw.open_session(Some(KEY), "2025-11-25").await;
    for progress in [None, Some(json!("p-1"))] {
        let mut meta = json!({
            "com.example/request": "r-1",
            "narrowgate/replayed": true,
            "tracestate": "vendor=secret",
        });
        if let Some(token) = &progress {
            meta["progressToken"] = token.clone();
        }
        let params = json!({"name": "echo_meta", "arguments": {}, "_meta": meta});
        let reply = raw
            .request(Some(KEY), &session, "2025-11-25", "tools/call", params)
            .await;
        let seen = &reply.message()["result"]["structuredContent"]["meta"];
        assert_eq!(seen["com.example/request"], json!("r-1"), "{reply:?}");
        assert!(seen.get("narrowgate/replayed").is_none(), "{seen}");
        assert!(seen.get("tracestate").is_none(), "{seen}");
        if let Some(token) = &progress {
            assert_ne!(seen.get("progressToken"), Some(token), "{seen}");
        }
    }
    let big = "x".repeat(9000);
    let params = json!({"name": "echo_meta", "arguments": {}, "_meta": {"note": big}});
    let reply = raw
        .request(Some(KEY), &session, "2025-11-25", "tools/call", params)
        .await;
    let error = &reply.message()["error"];
    assert_eq!(error["code"], json!(-32602), "{reply:?}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or("")
            .contains("8192 bytes"),
        "{error}"
    );
}

/// Proves: with `allowed_origins: []`, an `Origin` naming the gateway's own host and port is
/// admitted, and one with another port is still refused (403). Fails without the same-origin
/// rule (the first request got 403).
#[tokio::test]
async fn a_same_origin_request_is_admitted() {
    let upstream = HttpUpstream::start(&[]);
    let gateway = gateway_on_http(&upstream, ECHO_META, "allowed_origins: []\n");
    let raw = Raw::new(&gateway.url);
    let own = gateway.base.clone();
    let body = crate::common::initialize_body("2025-11-25");
    let auth = format!("Bearer {KEY}");
    let reply = raw
        .post(&[("authorization", &auth), ("origin", &own)], &body)
        .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    let port: u16 = own
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(1);
    let other = format!("http://127.0.0.1:{}", port.wrapping_add(1));
    let reply = raw
        .post(&[("authorization", &auth), ("origin", &other)], &body)
        .await;
    assert_eq!(reply.status, 403, "{reply:?}");
}

/// Proves: a client asking for 2024-11-05 (which the gateway does not serve) is offered the
/// closest version it does, 2025-03-26, not the newest; and `tools/list` on a 2025 revision has
/// no `cacheScope` (only 2026-07-28 defines it). Fails with rmcp's negotiation (2025-11-25 was
/// offered) and with `cacheScope` set for every revision.
#[tokio::test]
async fn old_clients_get_the_closest_version_and_no_cache_hints() {
    let upstream = HttpUpstream::start(&[]);
    let gateway = gateway_on_http(&upstream, ECHO_META, "");
    let raw = Raw::new(&gateway.url);
    let auth = format!("Bearer {KEY}");
    let reply = raw
        .post(
            &[("authorization", &auth)],
            &crate::common::initialize_body("2024-11-05"),
        )
        .await;
    assert_eq!(
        reply.message()["result"]["protocolVersion"],
        json!("2025-03-26"),
        "{reply:?}"
    );
    for version in ["2025-06-18", "2025-11-25"] {
        let session = raw.open_session(Some(KEY), version).await;
        let reply = raw
            .request(Some(KEY), &session, version, "tools/list", json!({}))
            .await;
        let result: &Value = &reply.message()["result"];
        assert!(result["tools"].is_array(), "{reply:?}");
        assert!(result.get("cacheScope").is_none(), "{version}: {result}");
    }
}
