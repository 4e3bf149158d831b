//! Tests of the Redis dedupe backend against a real redis-server.

use super::*;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

/// The integration tests' `redis-server` harness (std only), shared rather than copied.
#[path = "../../../../tests/common/redis.rs"]
mod redis_server;
use redis_server::{Redis, free_port};

const WINDOW: Duration = Duration::from_secs(60);
const LONGEST: Duration = Duration::from_secs(2);

/// Two replicas sharing a fresh `redis-server` (dropped with it), and a count of the runs of
/// the calls made through them.
fn two_replicas() -> (Redis, RedisDedupe, RedisDedupe, AtomicU32) {
    let redis = Redis::start();
    let (a, b) = (
        RedisDedupe::new(&redis.url()),
        RedisDedupe::new(&redis.url()),
    );
    (redis, a, b, AtomicU32::new(0))
}

fn key(args: &str) -> CallKey {
    CallKey {
        caller: "c".into(),
        tool: "t".into(),
        arguments: args.into(),
        idempotency_key: None,
    }
}

fn ok(count: u32) -> Recorded {
    Recorded {
        result: CallToolResult::structured(json!({"count": count})),
        outcome: Some(Outcome::Ok),
    }
}

/// A call that counts its runs and records `{"count": n}` after `delay`.
async fn counted(runs: &AtomicU32, delay: Duration, record: bool) -> ((), Option<Recorded>) {
    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
    // The call's own duration (the behaviour under test), not a wait for anything.
    tokio::time::sleep(delay).await;
    ((), record.then(|| ok(n)))
}

/// Runs `key(args)` through `dedupe` (usual window and time) as a call that answers at once and
/// records its answer.
async fn run_now(dedupe: &RedisDedupe, args: &str, runs: &AtomicU32) -> Deduped<()> {
    dedupe
        .run(
            &key(args),
            WINDOW,
            LONGEST,
            counted(runs, Duration::ZERO, true),
        )
        .await
}

/// Runs `key("x")` through replica `a` taking `delay`, and once it runs (it has claimed the key)
/// the same through replica `b` answering at once; both record their answer only when `record`.
async fn first_and_duplicate(
    (a, b): (&RedisDedupe, &RedisDedupe),
    runs: &AtomicU32,
    delay: Duration,
    record: bool,
) -> (Deduped<()>, Deduped<()>) {
    let x = key("x");
    let before = runs.load(Ordering::SeqCst);
    let first = a.run(&x, WINDOW, LONGEST, counted(runs, delay, record));
    let duplicate = async {
        let deadline = Instant::now() + Duration::from_secs(10);
        while runs.load(Ordering::SeqCst) == before {
            assert!(
                Instant::now() < deadline,
                "the first call did not start running within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        b.run(&x, WINDOW, LONGEST, counted(runs, Duration::ZERO, record))
            .await
    };
    tokio::join!(first, duplicate)
}

fn text(r: &Recorded) -> String {
    serde_json::to_value(&r.result).expect("json")["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Proves: a call recorded through one replica is replayed by another (same structured
/// content and outcome, marked replayed) without running, while other arguments run.
#[tokio::test]
async fn a_call_recorded_by_one_replica_is_replayed_by_another() {
    let (_redis, a, b, runs) = two_replicas();
    let first = run_now(&a, "x", &runs).await;
    assert!(matches!(first, Deduped::Ran(())));
    match run_now(&b, "x", &runs).await {
        Deduped::Replayed(r) => {
            assert_eq!(r.result.structured_content, Some(json!({"count": 1})));
            assert_eq!(r.outcome, Some(Outcome::Ok));
            let meta = r.result.meta.expect("meta");
            assert_eq!(meta.0.get("narrowgate/replayed"), Some(&Value::Bool(true)));
        }
        _ => panic!("the repeat through the other replica was not replayed"),
    }
    assert!(matches!(run_now(&b, "y", &runs).await, Deduped::Ran(())));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Proves: a duplicate arriving through another replica while the first call runs waits for
/// it and replays its answer: the call runs once.
#[tokio::test]
async fn a_duplicate_on_another_replica_waits_for_the_first() {
    let (_redis, a, b, runs) = two_replicas();
    let (first, second) =
        first_and_duplicate((&a, &b), &runs, Duration::from_millis(300), true).await;
    assert!(matches!(first, Deduped::Ran(())));
    match second {
        Deduped::Replayed(r) => {
            assert_eq!(r.result.structured_content, Some(json!({"count": 1})));
        }
        _ => panic!("the duplicate did not replay the first call"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Proves: a call that recorded nothing (it never reached the upstream) frees its key: a
/// duplicate that was waiting runs, and so does a later repeat.
#[tokio::test]
async fn an_unrecorded_call_lets_duplicates_run() {
    let (_redis, a, b, runs) = two_replicas();
    let (first, waiting) =
        first_and_duplicate((&a, &b), &runs, Duration::from_millis(200), false).await;
    assert!(matches!(
        (first, waiting),
        (Deduped::Ran(()), Deduped::Ran(()))
    ));
    assert!(matches!(run_now(&a, "x", &runs).await, Deduped::Ran(())));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

/// Proves: when the replica running a call is gone (its marker overdue: it never recorded
/// an answer), a duplicate answers "effect unknown" with outcome `unknown` and does not run
/// the call, and it stops waiting once the marker is overdue, not later.
#[tokio::test]
async fn a_call_lost_with_its_replica_is_not_repeated() {
    let redis = Redis::start();
    let b = RedisDedupe::new(&redis.url());
    // What a replica that died 300 ms before its deadline leaves behind.
    let marker = encode(&Entry::InFlight {
        call: "dead".into(),
        window_ms: millis(WINDOW),
        arguments: None,
    });
    let claimed = b
        .inner
        .claim(&redis_key(&key("x")), &marker, millis(WINDOW) + 300)
        .await
        .expect("claim");
    assert!(matches!(claimed, Claim::Ours));
    let runs = AtomicU32::new(0);
    let started = Instant::now();
    match run_now(&b, "x", &runs).await {
        Deduped::NotRun(r) => {
            assert_eq!(r.outcome, Some(Outcome::Unknown));
            assert!(
                text(&r).contains("effect is unknown, so it was not repeated"),
                "{}",
                text(&r)
            );
        }
        _ => panic!("a call of unknown effect was run again or replayed"),
    }
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(200)..Duration::from_millis(1500)).contains(&waited),
        "waited {waited:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Proves: a call dropped mid-flight (its client went away) marks its key abandoned, so a
/// duplicate answers "effect unknown" at once instead of running it or waiting out the
/// call's whole time.
#[tokio::test]
async fn a_dropped_call_is_marked_abandoned() {
    let (_redis, a, b, runs) = two_replicas();
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        a.run(
            &key("x"),
            WINDOW,
            Duration::from_secs(30),
            counted(&runs, Duration::from_secs(10), true),
        ),
    )
    .await;
    assert!(dropped.is_err(), "the slow call was dropped");
    let started = Instant::now();
    match b
        .run(
            &key("x"),
            WINDOW,
            Duration::from_secs(30),
            counted(&runs, Duration::ZERO, true),
        )
        .await
    {
        Deduped::NotRun(r) => {
            assert_eq!(r.outcome, Some(Outcome::Unknown));
            assert!(text(&r).contains("abandoned"), "{}", text(&r));
        }
        _ => panic!("the duplicate of an abandoned call was run or replayed"),
    }
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Proves: with Redis unreachable a dedupe call is refused before running (outcome
/// `upstream_error`, a message naming the state URL and saying nothing ran).
#[tokio::test]
async fn redis_down_refuses_the_call_without_running_it() {
    let port = free_port();
    let a = RedisDedupe::new(&format!("redis://127.0.0.1:{port}"));
    let runs = AtomicU32::new(0);
    match run_now(&a, "x", &runs).await {
        Deduped::NotRun(r) => {
            assert_eq!(r.outcome, Some(Outcome::UpstreamError));
            let t = text(&r);
            assert!(
                t.contains("cannot be reached")
                    && t.contains(&format!("127.0.0.1:{port}"))
                    && t.contains("nothing was run"),
                "{t}"
            );
        }
        _ => panic!("ran without its dedupe records"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// Proves: an idempotency key recorded by one replica is the identity on another: the same
/// arguments replay, other arguments are refused without running, and the key's record is not
/// the one of the same arguments without a key.
#[tokio::test]
async fn an_idempotency_key_holds_across_replicas() {
    let (_redis, a, b, runs) = two_replicas();
    let keyed = |args: &str| CallKey {
        idempotency_key: Some("K-1".into()),
        ..key(args)
    };
    let now = || counted(&runs, Duration::ZERO, true);
    assert!(matches!(
        a.run(&keyed("x"), WINDOW, LONGEST, now()).await,
        Deduped::Ran(())
    ));
    assert!(matches!(
        b.run(&keyed("x"), WINDOW, LONGEST, now()).await,
        Deduped::Replayed(_)
    ));
    match b.run(&keyed("y"), WINDOW, LONGEST, now()).await {
        Deduped::NotRun(r) => assert_eq!(r.outcome, Some(Outcome::RejectedInput)),
        _ => panic!("a reused key with other arguments ran or replayed"),
    }
    assert!(matches!(run_now(&b, "x", &runs).await, Deduped::Ran(())));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// Proves: the key depends on caller, tool and arguments, each kept apart, and has a fixed
/// shape whatever they contain.
#[test]
fn keys_separate_callers_tools_and_arguments() {
    let k = |c: &str, t: &str, a: &str| {
        redis_key(&CallKey {
            caller: c.into(),
            tool: t.into(),
            arguments: a.into(),
            idempotency_key: None,
        })
    };
    let base = k("c", "t", "a");
    assert!(base.starts_with("narrowgate:dedupe:") && base.len() == 18 + 64);
    assert_ne!(base, k("d", "t", "a"));
    assert_ne!(base, k("c", "u", "a"));
    assert_ne!(base, k("c", "t", "b"));
    assert_ne!(k("ab", "c", "a"), k("a", "bc", "a"));
    assert_eq!(base, k("c", "t", "a"));
}
