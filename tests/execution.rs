//! Execution semantics against the demo upstream injecting faults on demand:
//! timeouts, retries of idempotent tools only, at-most-once for the others, dedupe, invalid
//! JSON-RPC from an upstream, and tool-list changes under load.

use crate::common;

use std::time::{Duration, Instant};

use common::{
    Gateway, KEY, assert_same_structured_content, call_answered, call_ok, callers, client,
    concurrent_calls, contract_file, counter, counter_tool, demo_stdio_config, slow_tool, text_of,
    wait_for_counts,
};
use serde_json::json;

/// slow_read (timing out, retried twice), slow_once (timing out), count_slowly (a write timing
/// out), count_once (dedupe), then the rest.
fn contract() -> String {
    contract_file(
        "demo",
        &[
            &slow_tool("slow_read", "read", "    retries: 2\n"),
            &slow_tool("slow_once", "read", ""),
            &counter_tool("count_slowly", "    timeout: 300ms\n"),
            &counter_tool("count_once", "    dedupe: 60s\n"),
            CONTRACT_REST,
        ],
    )
}

const CONTRACT_REST: &str = r#"  peek_counter:
    privilege: read
  garbage:
    privilege: read
  echo:
    privilege: read
    input: { type: object, properties: { message: { type: string } }, required: [message] }
  toggle_extra:
    privilege: write
"#;

fn start() -> Gateway {
    Gateway::start(
        &demo_stdio_config(&callers(&[]), ""),
        &[("demo.yaml", contract().as_str())],
    )
}

/// Proves: an idempotent tool is retried on timeout, `retries` times at most (3 attempts of
/// 300 ms take at least 900 ms), and a tool without retries is tried once; neither outlives its
/// timeouts by more than a small margin.
#[tokio::test]
async fn idempotent_tools_are_retried_on_timeout_within_bounds() {
    let gw = start();
    let c = client(&gw.url, KEY).await;
    let started = Instant::now();
    let r = call_answered(&c, "slow_read", json!({"ms": 5000})).await;
    let took = started.elapsed();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert!(text_of(&r).contains("did not answer within"), "{r:?}");
    assert!(
        took >= Duration::from_millis(900),
        "3 attempts of 300 ms took only {took:?}"
    );
    assert!(took < Duration::from_millis(2500), "took {took:?}");

    let started = Instant::now();
    let r = call_answered(&c, "slow_once", json!({"ms": 5000})).await;
    let took = started.elapsed();
    assert_eq!(r.is_error, Some(true));
    assert!(
        took < Duration::from_millis(800),
        "one attempt of 300 ms took {took:?}"
    );
}

/// Proves: a non-idempotent call that timed out after being sent is reported as of unknown
/// effect, with the client told not to retry it blindly, and never retried: the upstream ran it
/// exactly once.
#[tokio::test]
async fn a_timed_out_write_is_unknown_and_never_retried() {
    let gw = start();
    let c = client(&gw.url, KEY).await;
    let before = counter(&c).await;
    let r = call_answered(&c, "count_slowly", json!({"delay_ms": 1500})).await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        text_of(&r).contains("may or may not have taken effect")
            && text_of(&r).contains("Do not retry it blindly"),
        "{r:?}"
    );
    // The upstream keeps running the write after the gateway gave up on it: wait until it (and
    // any retry, were there one) has finished before counting.
    let done = wait_for_counts(
        &c,
        Duration::from_secs(10),
        "the timed-out write finishing upstream",
        |counts| counts.running == 0,
    )
    .await;
    assert_eq!(
        done.count,
        before + 1,
        "the write ran more or less than once"
    );
}

/// Proves: an upstream that writes a line that is not JSON-RPC does not take the gateway down:
/// the call is answered, and later calls still work.
#[tokio::test]
async fn invalid_json_rpc_from_an_upstream_is_survived() {
    let gw = start();
    let c = client(&gw.url, KEY).await;
    let started = Instant::now();
    let _ = call_answered(&c, "garbage", json!({})).await;
    assert!(
        started.elapsed() < Duration::from_secs(31),
        "answered within the default timeout"
    );
    let r = gw
        .retry_until(
            Duration::from_secs(20),
            "the gateway's recovery",
            async || {
                let r = call_answered(&c, "echo", json!({"message": "still here"})).await;
                match r.is_error {
                    Some(true) => Err(format!("{r:?}")),
                    _ => Ok(r),
                }
            },
        )
        .await;
    assert!(text_of(&r).contains("still here"));
}

/// Proves: while the upstream's tool list changes repeatedly, calls of a tool that stays
/// published never fail.
#[tokio::test]
async fn calls_survive_tool_list_changes_under_load() {
    let gw = start();
    let c = client(&gw.url, KEY).await;
    let load = {
        let url = gw.url.clone();
        tokio::spawn(async move {
            let c = client(&url, KEY).await;
            let mut failures = Vec::new();
            for i in 0..200 {
                let r = call_answered(&c, "echo", json!({"message": format!("m{i}")})).await;
                if r.is_error == Some(true) {
                    failures.push(text_of(&r));
                }
            }
            failures
        })
    };
    for _ in 0..10 {
        call_ok(&c, "toggle_extra", json!({})).await;
        // Pacing, not waiting for anything: spreads the ten changes over the load's calls.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failures = load.await.expect("load task");
    assert!(
        failures.is_empty(),
        "{} calls failed: {:?}",
        failures.len(),
        failures.first()
    );
}

/// Proves: with `dedupe`, an identical call inside the window is answered from the record, marked
/// `_meta.narrowgate/replayed`, without reaching the upstream; different arguments run.
#[tokio::test]
async fn dedupe_replays_an_identical_call_instead_of_running_it_again() {
    let gw = start();
    let c = client(&gw.url, KEY).await;
    let before = counter(&c).await;
    let first = call_ok(&c, "count_once", json!({"delay_ms": 1})).await;
    assert!(
        first.meta.is_none()
            || first
                .meta
                .as_ref()
                .is_some_and(|m| m.0.get("narrowgate/replayed").is_none())
    );
    let second = call_answered(&c, "count_once", json!({"delay_ms": 1})).await;
    assert_eq!(second.structured_content, first.structured_content);
    let meta = second.meta.as_ref().expect("replayed result carries _meta");
    assert_eq!(meta.0.get("narrowgate/replayed"), Some(&json!(true)));
    assert_eq!(
        counter(&c).await,
        before + 1,
        "the repeat reached the upstream"
    );
    let other = call_answered(&c, "count_once", json!({"delay_ms": 2})).await;
    assert_ne!(other.structured_content, first.structured_content);
    assert_eq!(counter(&c).await, before + 2);
}

/// Proves: duplicates that arrive while the first identical call is in flight wait for it and
/// share its result: the upstream runs once.
#[tokio::test]
async fn duplicates_in_flight_wait_for_the_first() {
    let gw = start();
    let c = client(&gw.url, KEY).await;
    let before = counter(&c).await;
    let urls = [gw.url.as_str(); 5];
    let results = concurrent_calls(&urls, "count_once", json!({"delay_ms": 400})).await;
    assert_same_structured_content(&results);
    assert_eq!(
        counter(&c).await,
        before + 1,
        "the upstream ran more than once"
    );
}
