//! Idempotency keys (`_meta: {"narrowgate/idempotencyKey": "K"}`) against the real binary: the
//! same caller, tool and key is performed once (the same arguments replay the recorded answer,
//! other arguments are refused), across two gateways sharing a real Redis too; a key that is too
//! long is refused; the key reaches neither the upstream nor another caller.

use crate::common;

use common::{
    BOB, Gateway, HttpUpstream, KEY, Redis, callers, client, contract_file, counter, counter_tool,
    demo_stdio_config, receipts_json, text_of,
};
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use serde_json::{Value, json};

/// `count` (the demo counter, no `dedupe`), `peek_counter` and `echo_meta`.
fn contract() -> String {
    contract_file(
        "demo",
        &[
            &counter_tool("count", ""),
            &counter_tool("count_once", "    dedupe: 60s\n"),
            "  peek_counter:\n    privilege: read\n",
            "  echo_meta:\n    privilege: read\n    input: { type: object, properties: { meta: \
             { type: object } }, required: [meta] }\n",
        ],
    )
}

/// Calls `name` with `args` and the idempotency key `key`: the result (tool errors included).
async fn call_with_key(
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
    key: &str,
) -> CallToolResult {
    let params: CallToolRequestParams = serde_json::from_value(json!({
        "name": name,
        "arguments": args,
        "_meta": {"narrowgate/idempotencyKey": key},
    }))
    .expect("params");
    c.call_tool(params).await.expect("the gateway answers")
}

fn replayed(r: &CallToolResult) -> bool {
    r.meta
        .as_ref()
        .and_then(|m| m.0.get("narrowgate/replayed"))
        .is_some_and(|v| *v == json!(true))
}

/// Proves: with one gateway, a repeat of a key with the same arguments replays the recorded
/// answer (marked, the upstream ran once, the receipt marked replayed), with other arguments is
/// refused without running, another caller's identical key is its own request, a key over 255
/// characters is refused, and the upstream never sees the key.
#[tokio::test]
async fn a_key_is_performed_once_per_caller() {
    let gateway = Gateway::start(
        &demo_stdio_config(&callers(&[("bob", BOB, "['*']")]), ""),
        &[("demo.yaml", &contract())],
    );
    let alice = client(&gateway.url, KEY).await;
    let before = counter(&alice).await;

    let first = call_with_key(&alice, "count", json!({"delay_ms": 1}), "order-7").await;
    assert_ne!(first.is_error, Some(true), "{first:?}");
    assert!(!replayed(&first));
    let again = call_with_key(&alice, "count", json!({"delay_ms": 1}), "order-7").await;
    assert!(replayed(&again), "{again:?}");
    assert_eq!(again.structured_content, first.structured_content);
    assert_eq!(
        counter(&alice).await,
        before + 1,
        "the keyed call ran twice"
    );

    let other = call_with_key(&alice, "count", json!({"delay_ms": 2}), "order-7").await;
    assert_eq!(other.is_error, Some(true), "{other:?}");
    assert!(
        text_of(&other).contains("idempotency key was used for another request"),
        "{other:?}"
    );
    assert_eq!(counter(&alice).await, before + 1, "a reused key ran");

    let bob = client(&gateway.url, BOB).await;
    let bobs = call_with_key(&bob, "count", json!({"delay_ms": 1}), "order-7").await;
    assert!(!replayed(&bobs), "bob got alice's answer: {bobs:?}");
    assert_eq!(counter(&alice).await, before + 2);

    let long = "k".repeat(256);
    let refused = call_with_key(&alice, "count", json!({"delay_ms": 1}), &long).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(text_of(&refused).contains("1 to 255"), "{refused:?}");
    let longest = call_with_key(&alice, "count", json!({}), &"k".repeat(255)).await;
    assert_ne!(longest.is_error, Some(true), "{longest:?}");
    assert_eq!(counter(&alice).await, before + 3);

    let seen = call_with_key(&alice, "echo_meta", json!({"meta": {}}), "meta-1").await;
    let meta = seen.structured_content.expect("echo_meta answers")["meta"].clone();
    assert!(
        !meta.to_string().contains("idempotencyKey") && !meta.to_string().contains("meta-1"),
        "the upstream saw the key: {meta}"
    );

    let receipts = receipts_json(&gateway.config_path(), &["--tool", "count"]);
    let flags: Vec<(&str, bool)> = receipts
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap_or("?"),
                r["replayed"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        flags,
        [
            ("ok", false),
            ("ok", true),
            ("rejected_input", false),
            ("ok", false),
            ("rejected_input", false),
            ("ok", false),
        ]
    );
}

/// Proves: with `state: redis://…`, a key used through gateway A is the same request through
/// gateway B: the same arguments replay A's answer, other arguments are refused, and the
/// upstream (one, shared) ran the call once.
#[tokio::test]
async fn a_key_holds_across_two_gateways_sharing_redis() {
    let redis = Redis::start();
    let upstream = HttpUpstream::start(&[]);
    let start = || {
        Gateway::start(
            &format!(
                "upstreams:\n  demo:\n    url: {}\n{}state: redis://127.0.0.1:{}\n",
                upstream.url,
                callers(&[]),
                redis.port
            ),
            &[("demo.yaml", &contract())],
        )
    };
    let (a, b) = (start(), start());
    let (ca, cb) = (client(&a.url, KEY).await, client(&b.url, KEY).await);
    let before = counter(&ca).await;
    let first = call_with_key(&ca, "count", json!({"delay_ms": 1}), "pay-99").await;
    assert_ne!(first.is_error, Some(true), "{first:?}");
    let second = call_with_key(&cb, "count", json!({"delay_ms": 1}), "pay-99").await;
    assert!(replayed(&second), "B ran the keyed call again: {second:?}");
    assert_eq!(second.structured_content, first.structured_content);
    let other = call_with_key(&cb, "count", json!({"delay_ms": 3}), "pay-99").await;
    assert!(
        text_of(&other).contains("used for another request"),
        "{other:?}"
    );
    assert_eq!(
        counter(&cb).await,
        before + 1,
        "the upstream ran it more than once"
    );
}

/// Proves: through rmcp's own handler (`direct_calls: false`) the key is read alike, and a
/// `dedupe` tool keeps its promise under keys: a keyed call, the identical call without a key
/// and under another key all get the one answer, the upstream ran it once.
#[tokio::test]
async fn keys_and_dedupe_run_a_call_once_through_rmcp_too() {
    let gateway = Gateway::start(
        &demo_stdio_config(&callers(&[]), "direct_calls: false\n"),
        &[("demo.yaml", &contract())],
    );
    let alice = client(&gateway.url, KEY).await;
    let before = counter(&alice).await;
    let first = call_with_key(&alice, "count", json!({"delay_ms": 1}), "k-1").await;
    let again = call_with_key(&alice, "count", json!({"delay_ms": 1}), "k-1").await;
    assert!(!replayed(&first) && replayed(&again), "{again:?}");
    assert_eq!(counter(&alice).await, before + 1);

    let keyed = call_with_key(&alice, "count_once", json!({"delay_ms": 1}), "k-2").await;
    assert!(!replayed(&keyed), "{keyed:?}");
    let plain = common::call_answered(&alice, "count_once", json!({"delay_ms": 1})).await;
    assert!(replayed(&plain), "dedupe ran a keyed call again: {plain:?}");
    let other_key = call_with_key(&alice, "count_once", json!({"delay_ms": 1}), "k-3").await;
    assert!(replayed(&other_key), "{other_key:?}");
    assert_eq!(plain.structured_content, keyed.structured_content);
    assert_eq!(
        counter(&alice).await,
        before + 2,
        "the dedupe call ran twice"
    );
}
