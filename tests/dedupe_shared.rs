//! `dedupe` across replicas (with `state: redis://…`) against the real binary: two
//! gateways share a real `redis-server` and sit in front of ONE demo upstream over HTTP, whose
//! process-wide counter shows how often a call really ran.

use crate::common;

use std::time::{Duration, Instant};

use common::{
    Gateway, HttpUpstream, KEY, Redis, assert_same_structured_content, call_answered, call_ok,
    callers, client, concurrent_calls, contract_file, counter, counter_tool, free_port, text_of,
    tool_params, wait_for_counts,
};
use rmcp::model::CallToolResult;
use serde_json::json;

/// count_once (dedupe), count_once_quickly (dedupe, 1 s timeout), peek_counter and echo.
fn contract() -> String {
    contract_file(
        "demo",
        &[
            &counter_tool("count_once", "    dedupe: 60s\n"),
            &counter_tool("count_once_quickly", "    timeout: 1s\n    dedupe: 60s\n"),
            CONTRACT_REST,
        ],
    )
}

const CONTRACT_REST: &str = r#"  peek_counter:
    privilege: read
  echo:
    privilege: read
    input: { type: object, properties: { message: { type: string } }, required: [message] }
"#;

/// A gateway in front of `upstream` with its state in Redis at `port`.
fn start(upstream: &HttpUpstream, port: u16) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}state: redis://127.0.0.1:{port}\n",
        upstream.url,
        callers(&[])
    );
    Gateway::start(&config, &[("demo.yaml", contract().as_str())])
}

fn replayed(r: &CallToolResult) -> bool {
    r.meta
        .as_ref()
        .and_then(|m| m.0.get("narrowgate/replayed"))
        .is_some_and(|v| *v == json!(true))
}

/// Proves: a call made through gateway A is answered by gateway B, for the identical call, from
/// A's record: marked `_meta.narrowgate/replayed`, with the same structuredContent, and the
/// upstream ran it once; the same tool with other arguments still runs through B.
#[tokio::test]
async fn a_call_through_one_gateway_is_replayed_by_the_other() {
    let redis = Redis::start();
    let upstream = HttpUpstream::start(&[]);
    let (a, b) = (start(&upstream, redis.port), start(&upstream, redis.port));
    let (ca, cb) = (client(&a.url, KEY).await, client(&b.url, KEY).await);
    let before = counter(&ca).await;

    let first = call_ok(&ca, "count_once", json!({"delay_ms": 1})).await;
    assert!(!replayed(&first), "{first:?}");
    let second = call_answered(&cb, "count_once", json!({"delay_ms": 1})).await;
    assert!(replayed(&second), "B ran the call again: {second:?}");
    assert_eq!(second.structured_content, first.structured_content);
    assert_eq!(counter(&cb).await, before + 1, "the upstream ran it twice");

    let other = call_answered(&cb, "count_once", json!({"delay_ms": 2})).await;
    assert!(!replayed(&other), "{other:?}");
    assert_eq!(counter(&ca).await, before + 2);
}

/// Proves: identical calls arriving concurrently through both gateways (the first still in
/// flight, 400 ms) all get one answer, and the upstream ran the call once.
#[tokio::test]
async fn concurrent_duplicates_through_two_gateways_run_once() {
    let redis = Redis::start();
    let upstream = HttpUpstream::start(&[]);
    let (a, b) = (start(&upstream, redis.port), start(&upstream, redis.port));
    let before = counter(&client(&a.url, KEY).await).await;
    let urls = [a.url.as_str(), b.url.as_str()].repeat(3);
    let results = concurrent_calls(&urls, "count_once", json!({"delay_ms": 400})).await;
    assert_same_structured_content(&results);
    assert_eq!(
        results.iter().filter(|r| !replayed(r)).count(),
        1,
        "exactly one answer is not a replay: {results:?}"
    );
    assert_eq!(
        counter(&client(&b.url, KEY).await).await,
        before + 1,
        "the upstream ran more than once"
    );
}

/// Proves: when the gateway running a call dies before recording its answer, the identical call
/// through the other gateway is not run again: once the first call's time (timeout + grace) is
/// up, it answers a tool error saying the effect is unknown (outcome `unknown`), and keeps doing
/// so for later repeats; the upstream ran the call once.
#[tokio::test]
async fn a_call_lost_with_its_gateway_is_not_repeated_by_the_other() {
    let redis = Redis::start();
    let upstream = HttpUpstream::start(&[]);
    let (a, b) = (start(&upstream, redis.port), start(&upstream, redis.port));
    let cb = client(&b.url, KEY).await;
    let before = counter(&cb).await;
    let ca = client(&a.url, KEY).await;
    let doomed = tokio::spawn(async move {
        // Counts at once, then answers after 800 ms: within its 1 s timeout, too late for A.
        let _ = ca
            .call_tool(tool_params("count_once_quickly", json!({"delay_ms": 800})))
            .await;
    });
    // A claimed the call before running it, and the upstream counts it at once.
    wait_for_counts(
        &cb,
        Duration::from_secs(10),
        "A's call under way",
        |counts| counts.count > before,
    )
    .await;
    drop(a); // killed mid-call: it never records the answer
    let started = Instant::now();
    let r = call_answered(&cb, "count_once_quickly", json!({"delay_ms": 800})).await;
    let waited = started.elapsed();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert!(
        text_of(&r).contains("its effect is unknown, so it was not repeated"),
        "{r:?}"
    );
    // A's marker is overdue 1 s (timeout) + 5 s (grace) after A claimed it, just before B asked.
    assert!(
        (Duration::from_secs(4)..Duration::from_secs(9)).contains(&waited),
        "waited {waited:?}"
    );
    let again = call_answered(&cb, "count_once_quickly", json!({"delay_ms": 800})).await;
    assert!(text_of(&again).contains("effect is unknown"), "{again:?}");
    assert_eq!(
        counter(&cb).await,
        before + 1,
        "the lost call was run again"
    );
    assert!(b.log().contains("outcome=unknown"), "{}", b.log());
    doomed.abort();
}

/// Proves: with `state: redis://…` and Redis unreachable, a dedupe tool is refused with a clear
/// tool error (naming the state and saying nothing ran; outcome `upstream_error`) and a
/// "fail closed" log line, without reaching the upstream, while tools without `dedupe` or limits
/// still work; once Redis is up the dedupe tool runs again by itself.
#[tokio::test]
async fn redis_down_refuses_dedupe_tools_only() {
    let port = free_port();
    let upstream = HttpUpstream::start(&[]);
    let gw = start(&upstream, port);
    let c = client(&gw.url, KEY).await;
    let before = counter(&c).await;
    let refused = call_answered(&c, "count_once", json!({"delay_ms": 1})).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let t = text_of(&refused);
    assert!(
        t.contains("cannot be reached")
            && t.contains(&format!("127.0.0.1:{port}"))
            && t.contains("nothing was run"),
        "{t}"
    );
    call_ok(&c, "echo", json!({"message": "still here"})).await;
    assert_eq!(
        counter(&c).await,
        before,
        "the refused call reached the upstream"
    );
    let log = gw.log();
    assert!(
        log.contains("fail closed") && log.contains("outcome=upstream_error"),
        "{log}"
    );

    let _redis = Redis::start_on(port);
    let ran = call_ok(&c, "count_once", json!({"delay_ms": 1})).await;
    assert!(!replayed(&ran), "{ran:?}");
    assert_eq!(counter(&c).await, before + 1);
}
