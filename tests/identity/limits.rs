//! Rate limits against the real binary: bursts, per-tool limits, and limits shared by
//! two gateways through a real `redis-server`, which fails closed when Redis is gone.

use serde_json::{Value, json};

use super::common::{HttpUpstream, KEY, Raw, Redis, free_port, result_text};
use super::support::keys;
use super::{BOB, CAROL, V, call, call_once, counter, start_with_file, token};

fn refusal_of(message: &Value) -> (String, u64) {
    let result = &message["result"];
    assert_eq!(result["isError"], json!(true), "{message}");
    let ms = result["_meta"]["narrowgate/retryAfterMs"]
        .as_u64()
        .unwrap_or_else(|| panic!("no retry hint in {message}"));
    (result_text(result), ms)
}

/// Proves: a caller-wide rate (`callers[].rate`, and a role's `rate`) admits its burst, then
/// refuses with a tool error naming the limit and a retry hint, and the refused call never
/// reaches the upstream.
#[tokio::test]
async fn a_burst_is_admitted_then_refused_with_a_retry_hint() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "");
    let raw = Raw::new(&gw.url);
    let session = raw.open_session(Some(CAROL), V).await;
    for _ in 0..3 {
        let ok = call(&raw, CAROL, &session, "counter", json!({}))
            .await
            .message();
        assert_eq!(ok["result"]["isError"], json!(false), "{ok}");
    }
    let refused = call(&raw, CAROL, &session, "counter", json!({}))
        .await
        .message();
    let (text, ms) = refusal_of(&refused);
    assert!(
        text.contains("caller `carol`")
            && text.contains("1/m burst 3")
            && text.contains("retry in"),
        "{text}"
    );
    assert!((1..=60_000).contains(&ms), "{ms}");
    assert_eq!(counter(&raw).await, 4, "the refused call was not forwarded");

    let ops = token(&keys().ed, "ops-user", json!({"groups": ["ops"]}));
    let session = raw.open_session(Some(&ops), V).await;
    for _ in 0..2 {
        let ok = call(&raw, &ops, &session, "echo", json!({"message": "x"}))
            .await
            .message();
        assert_eq!(ok["result"]["isError"], json!(false), "{ok}");
    }
    let (text, _) = refusal_of(
        &call(&raw, &ops, &session, "echo", json!({"message": "x"}))
            .await
            .message(),
    );
    assert!(
        text.contains("caller `ops-user`") && text.contains("1/m burst 2"),
        "{text}"
    );
    assert!(gw.log().contains("outcome=rate_limited"), "{}", gw.log());
}

/// Proves: a contract's `rate` limits each caller on that tool only: the caller's other tools and
/// other callers on the same tool are unaffected.
#[tokio::test]
async fn a_per_tool_limit_is_independent_of_other_tools_and_callers() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "");
    let raw = Raw::new(&gw.url);
    let session = raw.open_session(Some(KEY), V).await;
    let echo = |tool: &'static str| call(&raw, KEY, &session, tool, json!({"message": "x"}));
    for _ in 0..2 {
        assert_eq!(
            echo("limited_echo").await.message()["result"]["isError"],
            json!(false)
        );
    }
    let (text, ms) = refusal_of(&echo("limited_echo").await.message());
    assert!(
        text.contains("caller `alice` may call `limited_echo` 2/m"),
        "{text}"
    );
    assert!((1..=30_000).contains(&ms), "{ms}");
    assert_eq!(
        echo("echo").await.message()["result"]["isError"],
        json!(false)
    );
    let bob = call_once(&raw, BOB, "limited_echo", json!({"message": "x"})).await;
    assert_eq!(bob["result"]["isError"], json!(false), "{bob}");
}

/// Proves: two gateways sharing a real redis-server hold one combined limit (caller-wide and per
/// tool): together they admit what one would, and the upstream sees only admitted calls.
#[tokio::test]
async fn two_gateways_share_limits_through_redis() {
    let redis = Redis::start();
    let upstream = HttpUpstream::start(&[]);
    let state = format!("state: {}\n", redis.url());
    let (a, _da) = start_with_file(&upstream, &state);
    let (b, _db) = start_with_file(&upstream, &state);
    let (ra, rb) = (Raw::new(&a.url), Raw::new(&b.url));
    let (sa, sb) = (
        ra.open_session(Some(CAROL), V).await,
        rb.open_session(Some(CAROL), V).await,
    );
    for (raw, session) in [(&ra, &sa), (&rb, &sb), (&ra, &sa)] {
        let ok = call(raw, CAROL, session, "counter", json!({}))
            .await
            .message();
        assert_eq!(ok["result"]["isError"], json!(false), "{ok}");
    }
    for (raw, session) in [(&rb, &sb), (&ra, &sa)] {
        let (text, ms) = refusal_of(
            &call(raw, CAROL, session, "counter", json!({}))
                .await
                .message(),
        );
        assert!(text.contains("caller `carol`"), "{text}");
        assert!((1..=60_000).contains(&ms), "{ms}");
    }
    assert_eq!(
        counter(&rb).await,
        4,
        "3 admitted calls of carol + this one"
    );

    let first = call_once(&ra, KEY, "limited_echo", json!({"message": "x"})).await;
    let second = call_once(&rb, KEY, "limited_echo", json!({"message": "x"})).await;
    assert_eq!(
        (
            first["result"]["isError"].clone(),
            second["result"]["isError"].clone()
        ),
        (json!(false), json!(false))
    );
    let (text, _) = refusal_of(&call_once(&ra, KEY, "limited_echo", json!({"message": "x"})).await);
    assert!(text.contains("`limited_echo` 2/m"), "{text}");
}

/// Proves: with `state: redis://…` and Redis unreachable, calls under a limit are refused with a
/// clear tool error and a log line (fail closed), calls without a limit still work, and the gateway
/// recovers by itself when Redis comes back and fails closed again when it goes away.
#[tokio::test]
async fn redis_down_fails_closed() {
    let port = free_port();
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, &format!("state: redis://127.0.0.1:{port}\n"));
    let raw = Raw::new(&gw.url);
    let refused = call_once(&raw, KEY, "limited_echo", json!({"message": "x"})).await;
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let text = result_text(&refused["result"]);
    assert!(
        text.contains("cannot be checked") && text.contains(&format!("127.0.0.1:{port}")),
        "{text}"
    );
    let free = call_once(&raw, KEY, "echo", json!({"message": "x"})).await;
    assert_eq!(free["result"]["isError"], json!(false), "{free}");
    assert!(gw.log().contains("fail closed"), "{}", gw.log());
    assert_eq!(counter(&raw).await, 1, "the refused call was not forwarded");

    let redis = Redis::start_on(port);
    let back = call_once(&raw, KEY, "limited_echo", json!({"message": "x"})).await;
    assert_eq!(back["result"]["isError"], json!(false), "{back}");
    drop(redis); // kills redis-server and waits for it to exit: its sockets are closed
    let again = call_once(&raw, KEY, "limited_echo", json!({"message": "x"})).await;
    assert!(
        result_text(&again["result"]).contains("cannot be checked"),
        "{again}"
    );
}
