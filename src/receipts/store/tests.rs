//! The receipts writer: commits under concurrency, failures, schema versions.

use super::*;
use crate::receipts::Outcome;
use crate::receipts::store::file::SCHEMA_VERSION;
use rusqlite::{Connection, params};
use serde_json::json;
use std::path::PathBuf;
use std::time::SystemTime;

/// Receipts at `path`, without arguments, retention or fsync.
fn settings(path: std::path::PathBuf) -> Settings {
    Settings {
        path,
        url: None,
        store_arguments: false,
        retention: None,
        fsync: false,
    }
}

/// Opens the log and waits until its writer thread has reached its first wait: just started, it
/// commits whatever it finds queued, and the tests that count callers' commits (or expect a
/// caller to find the writer free) must not race it.
async fn open_settled(settings: &Settings) -> ReceiptLog {
    let log = ReceiptLog::open(settings).expect("open");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !log.shared.writer_waiting.load(Ordering::Acquire) {
        assert!(
            std::time::Instant::now() < deadline,
            "the receipts writer thread did not start waiting within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    log
}

fn call<'a>(tool: &'a str, arguments: &'a serde_json::Value) -> Call<'a> {
    Call {
        caller: "alice",
        tool,
        contract: None,
        arguments,
        outcome: Outcome::Denied,
        attempts: 0,
        replayed: false,
        started: SystemTime::now(),
        duration: Duration::from_millis(3),
        trace_id: None,
        reason: None,
        approval: None,
        error_type: None,
        fallback: None,
        cached: false,
    }
}

#[tokio::test]
async fn concurrent_records_are_all_committed_and_readable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = Settings {
        store_arguments: true,
        ..settings(dir.path().join("nested/folder/receipts.db"))
    };
    let log = std::sync::Arc::new(ReceiptLog::open(&settings).expect("open"));
    let mut tasks = Vec::new();
    for i in 0..200 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let args = json!({ "i": i });
            log.record(&call("nope", &args)).await
        }));
    }
    for task in tasks {
        assert!(task.await.expect("task").is_some(), "every receipt commits");
    }
    let connection = open_for_reading(&settings.path).expect("read");
    let count: i64 = connection
        .query_row("SELECT count(*) FROM receipts", [], |r| r.get(0))
        .expect("count");
    assert_eq!(count, 200);
    let kept: Option<String> = connection
        .query_row("SELECT arguments FROM receipts LIMIT 1", [], |r| r.get(0))
        .expect("row");
    assert_eq!(kept, None, "arguments of an unknown tool are never kept");
}

/// Proves: calls ready at the same time share one commit (group commit): with other calls under
/// way, each lets the others on its worker queue their receipts before it commits. Without the
/// yield, 50 calls made 50 commits.
#[tokio::test(flavor = "current_thread")]
async fn receipts_ready_together_share_one_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = settings(dir.path().join("r.db"));
    let log = open_settled(&settings).await;
    let arguments: Vec<_> = (0..50).map(|i| json!({ "i": i })).collect();
    let calls: Vec<_> = arguments.iter().map(|a| call("nope", a)).collect();
    let _under_way: Vec<_> = calls.iter().map(|_| log.call_started()).collect();
    // The 50 calls polled in turn by one task, as a worker polls the tasks ready on it (spawned
    // tasks would add the scheduler's own rhythm, which splits the group at random places).
    let mut records: Vec<_> = calls.iter().map(|c| Box::pin(log.record(c))).collect();
    let mut recorded: Vec<Option<Option<String>>> = vec![None; records.len()];
    std::future::poll_fn(|cx| {
        for (record, slot) in records.iter_mut().zip(recorded.iter_mut()) {
            if slot.is_none()
                && let std::task::Poll::Ready(r) = record.as_mut().poll(cx)
            {
                *slot = Some(r);
            }
        }
        if recorded.iter().all(Option::is_some) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    assert!(
        recorded.iter().all(|r| matches!(r, Some(Some(_)))),
        "every receipt commits"
    );
    // One commit, or a few when the writer thread (which commits what it finds queued) takes a
    // share; without the yield each receipt made its own: 50.
    let commits = log.shared.commits.load(Ordering::Relaxed);
    assert!(
        commits < 10,
        "50 receipts ready together took {commits} commits"
    );
    let connection = open_for_reading(&settings.path).expect("read");
    let count: i64 = connection
        .query_row("SELECT count(*) FROM receipts", [], |r| r.get(0))
        .expect("count");
    assert_eq!(count, 50);
}

/// Proves: a lone call does not wait for company: its receipt is committed within the first poll
/// of `record` (a yield would leave it pending and cost the call a trip through the scheduler).
#[tokio::test(flavor = "current_thread")]
async fn a_lone_call_commits_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = open_settled(&settings(dir.path().join("r.db"))).await;
    let _under_way = log.call_started();
    let args = json!({});
    let call = call("nope", &args);
    let mut record = std::pin::pin!(log.record(&call));
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match record.as_mut().poll(&mut context) {
        std::task::Poll::Ready(recorded) => assert!(recorded.is_some(), "committed"),
        std::task::Poll::Pending => panic!("a lone call's receipt waited instead of committing"),
    }
}

/// Proves: with many callers on several threads racing to commit (inline, and through the
/// writer thread with `fsync`), no receipt is lost or left waiting: callers that find the
/// writer busy are carried by the commit in progress or the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_callers_all_commit_in_both_modes() {
    for fsync in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let settings = Settings {
            fsync,
            ..settings(dir.path().join("r.db"))
        };
        let log = std::sync::Arc::new(ReceiptLog::open(&settings).expect("open"));
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..32 {
            let log = log.clone();
            tasks.spawn(async move {
                for i in 0..40 {
                    let args = json!({ "t": t, "i": i });
                    let recorded = tokio::time::timeout(
                        Duration::from_secs(20),
                        log.record(&call("nope", &args)),
                    )
                    .await
                    .expect("no receipt waits forever");
                    assert!(recorded.is_some(), "every receipt commits (fsync: {fsync})");
                }
            });
        }
        tasks.join_all().await;
        let connection = open_for_reading(&settings.path).expect("read");
        let count: i64 = connection
            .query_row("SELECT count(*) FROM receipts", [], |r| r.get(0))
            .expect("count");
        assert_eq!(count, 32 * 40, "fsync: {fsync}");
    }
}

#[tokio::test]
async fn a_failed_write_is_reported_and_does_not_block_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = settings(dir.path().join("r.db"));
    let log = ReceiptLog::open(&settings).expect("open");
    let args = json!({});
    assert!(log.record(&call("a", &args)).await.is_some());
    // Sabotage the database from outside, as a full disk or an operator's mistake would.
    let other = Connection::open(&settings.path).expect("open");
    other
        .execute_batch("DROP TABLE receipts")
        .expect("drop table");
    let answered = tokio::time::timeout(Duration::from_secs(10), log.record(&call("b", &args)))
        .await
        .expect("record returns although the write failed");
    assert_eq!(answered, None);
}

/// Not a check but a measurement, for the benchmark notes:
/// `cargo test --release --lib receipt_log_write_cost -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark"]
async fn receipt_log_write_cost() {
    for base in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        let dir = tempfile::tempdir_in(&base).expect("tempdir");
        let settings = settings(dir.path().join("r.db"));
        let log = std::sync::Arc::new(ReceiptLog::open(&settings).expect("open"));
        let args = json!({"message": "hello"});
        const N: usize = 500;
        let started = Instant::now();
        for _ in 0..N {
            assert!(log.record(&call("echo", &args)).await.is_some());
        }
        let sequential = started.elapsed();
        const TASKS: usize = 64;
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..TASKS {
            let log = log.clone();
            tasks.spawn(async move {
                let args = json!({"message": "hello"});
                for _ in 0..N / 10 {
                    assert!(log.record(&call("echo", &args)).await.is_some());
                }
            });
        }
        tasks.join_all().await;
        let concurrent = started.elapsed();
        eprintln!(
            "{}: one at a time {:.0} receipts/s ({:.2} ms each); {TASKS} concurrent \
             writers {:.0} receipts/s",
            base.display(),
            N as f64 / sequential.as_secs_f64(),
            sequential.as_secs_f64() * 1000.0 / N as f64,
            (TASKS * N / 10) as f64 / concurrent.as_secs_f64()
        );
    }
}

/// Proves: a database written by a newer narrowgate is neither written nor read (by the
/// gateway or `narrowgate receipts`), with an error saying so.
#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("r.db");
    let c = Connection::open(&path).expect("open");
    c.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .expect("set version");
    drop(c);
    let settings = settings(path);
    let e = ReceiptLog::open(&settings).expect_err("refused");
    assert!(e.to_string().contains("newer"), "{e}");
    let e = open_for_reading(&settings.path).expect_err("refused for reading too");
    assert!(e.to_string().contains("newer"), "{e}");
}

/// Proves: a version-1 database (rowid table with `id` and `time` indexes) is upgraded in place
/// when the gateway opens it: every receipt is kept, `--since` still finds it, new receipts are
/// added beside it, and the version is recorded.
#[tokio::test]
async fn a_version_1_database_is_upgraded_keeping_its_receipts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("r.db");
    let old = Connection::open(&path).expect("open");
    old.execute_batch(
        "CREATE TABLE receipts (
            id TEXT PRIMARY KEY NOT NULL, time TEXT NOT NULL, caller TEXT NOT NULL,
            tool TEXT NOT NULL, upstream TEXT, upstream_tool TEXT, contract_digest TEXT,
            arguments_digest TEXT NOT NULL, outcome TEXT NOT NULL, attempts INTEGER NOT NULL,
            replayed INTEGER NOT NULL, duration_ms REAL NOT NULL, trace_id TEXT, arguments TEXT);
         CREATE INDEX receipts_time ON receipts (time);
         PRAGMA user_version = 1;",
    )
    .expect("version 1 schema");
    let id = uuid::Uuid::now_v7().to_string();
    let time = crate::receipts::format_utc_millis(crate::receipts::millis_ago(Duration::ZERO));
    old.execute(
        "INSERT INTO receipts VALUES (?1, ?2, 'alice', 'echo', 'demo', 'echo', NULL, 'abc', \
         'ok', 1, 0, 1.5, NULL, NULL)",
        params![id, time],
    )
    .expect("old receipt");
    drop(old);

    let settings = settings(path.clone());
    let log = ReceiptLog::open(&settings).expect("upgraded");
    let args = json!({});
    assert!(log.record(&call("b", &args)).await.is_some());
    let connection = open_for_reading(&path).expect("read");
    let version: i64 = connection
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION);
    let recent = crate::receipts::query::receipts(
        &path,
        &crate::receipts::Filter {
            since: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    )
    .expect("query");
    let ids: Vec<&str> = recent.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], id, "the old receipt comes first, as the oldest");
    let indexes: i64 = connection
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'receipts'",
            [],
            |r| r.get(0),
        )
        .expect("indexes");
    assert_eq!(indexes, 0, "the key is the only index left");
}

/// Proves: a version-4 database (before the typed-error, fallback and cache columns) reads as it
/// is (those fields empty), is upgraded in place when the gateway opens it, keeps its receipts,
/// and new receipts record the three fields.
#[tokio::test]
async fn a_version_4_database_gains_the_recovery_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("r.db");
    let old = Connection::open(&path).expect("open");
    old.execute_batch(
        "CREATE TABLE receipts (
            id TEXT PRIMARY KEY NOT NULL, time TEXT NOT NULL, caller TEXT NOT NULL,
            tool TEXT NOT NULL, upstream TEXT, upstream_tool TEXT, contract_digest TEXT,
            arguments_digest TEXT NOT NULL, outcome TEXT NOT NULL, attempts INTEGER NOT NULL,
            replayed INTEGER NOT NULL, duration_ms REAL NOT NULL, trace_id TEXT, arguments TEXT,
            reason TEXT, approval_id TEXT, approval_decision TEXT, approver TEXT,
            approval_wait_ms REAL) WITHOUT ROWID;
         PRAGMA user_version = 4;",
    )
    .expect("version 4 schema");
    let id = uuid::Uuid::now_v7().to_string();
    let time = crate::receipts::format_utc_millis(crate::receipts::millis_ago(Duration::ZERO));
    old.execute(
        "INSERT INTO receipts (id, time, caller, tool, arguments_digest, outcome, attempts, \
         replayed, duration_ms) VALUES (?1, ?2, 'alice', 'echo', 'abc', 'timeout', 1, 0, 1.5)",
        params![id, time],
    )
    .expect("old receipt");
    drop(old);
    let all = || {
        crate::receipts::query::receipts(&path, &crate::receipts::Filter::default()).expect("query")
    };
    let before = all();
    assert_eq!(before.len(), 1);
    assert_eq!((&before[0].error_type, before[0].cached), (&None, false));

    let log = ReceiptLog::open(&settings(path.clone())).expect("upgraded");
    let args = json!({});
    let mut new = call("b", &args);
    new.error_type = Some("unavailable");
    new.fallback = Some("degrade");
    new.cached = true;
    assert!(log.record(&new).await.is_some());
    let after = all();
    assert_eq!(after.len(), 2);
    assert_eq!(after[0].id, id, "the old receipt is kept");
    assert_eq!(after[0].error_type, None);
    assert_eq!(after[1].error_type.as_deref(), Some("unavailable"));
    assert_eq!(after[1].fallback.as_deref(), Some("degrade"));
    assert!(after[1].cached);
    let version: i64 = open_for_reading(&path)
        .expect("read")
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION);
}

/// Proves: a version-2 database (without `reason`) is read as it is by `narrowgate receipts`,
/// then upgraded in place when the gateway opens it: its receipts are kept (without a reason) and
/// new ones record theirs.
#[tokio::test]
async fn a_version_2_database_gains_the_reason_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("r.db");
    let old = Connection::open(&path).expect("open");
    old.execute_batch(
        "CREATE TABLE receipts (
            id TEXT PRIMARY KEY NOT NULL, time TEXT NOT NULL, caller TEXT NOT NULL,
            tool TEXT NOT NULL, upstream TEXT, upstream_tool TEXT, contract_digest TEXT,
            arguments_digest TEXT NOT NULL, outcome TEXT NOT NULL, attempts INTEGER NOT NULL,
            replayed INTEGER NOT NULL, duration_ms REAL NOT NULL, trace_id TEXT, arguments TEXT)
            WITHOUT ROWID;
         PRAGMA user_version = 2;",
    )
    .expect("version 2 schema");
    let id = uuid::Uuid::now_v7().to_string();
    let time = crate::receipts::format_utc_millis(crate::receipts::millis_ago(Duration::ZERO));
    old.execute(
        "INSERT INTO receipts VALUES (?1, ?2, 'alice', 'echo', 'demo', 'echo', NULL, 'abc', \
         'ok', 1, 0, 1.5, NULL, NULL)",
        params![id, time],
    )
    .expect("old receipt");
    drop(old);
    let all = crate::receipts::Filter::default();
    let before = crate::receipts::query::receipts(&path, &all).expect("reads version 2");
    assert_eq!((before.len(), before[0].reason.as_deref()), (1, None));

    let log = ReceiptLog::open(&settings(path.clone())).expect("upgraded");
    let args = json!({});
    let mut denied = call("b", &args);
    denied.reason = Some("precondition 0: no");
    assert!(log.record(&denied).await.is_some());
    let after = crate::receipts::query::receipts(&path, &all).expect("query");
    let reasons: Vec<Option<&str>> = after.iter().map(|r| r.reason.as_deref()).collect();
    assert_eq!(reasons, [None, Some("precondition 0: no")]);
}

/// Proves: a version-3 database (with `reason`, without the approval columns) is read as it is by
/// `narrowgate receipts`, then upgraded in place when the gateway opens it: its receipts are kept
/// with empty approval fields, and new receipts record their approval.
#[tokio::test]
async fn a_version_3_database_gains_the_approval_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("r.db");
    let old = Connection::open(&path).expect("open");
    old.execute_batch(
        "CREATE TABLE receipts (
            id TEXT PRIMARY KEY NOT NULL, time TEXT NOT NULL, caller TEXT NOT NULL,
            tool TEXT NOT NULL, upstream TEXT, upstream_tool TEXT, contract_digest TEXT,
            arguments_digest TEXT NOT NULL, outcome TEXT NOT NULL, attempts INTEGER NOT NULL,
            replayed INTEGER NOT NULL, duration_ms REAL NOT NULL, trace_id TEXT, arguments TEXT,
            reason TEXT) WITHOUT ROWID;
         PRAGMA user_version = 3;",
    )
    .expect("version 3 schema");
    let id = uuid::Uuid::now_v7().to_string();
    let time = crate::receipts::format_utc_millis(crate::receipts::millis_ago(Duration::ZERO));
    old.execute(
        "INSERT INTO receipts VALUES (?1, ?2, 'alice', 'echo', 'demo', 'echo', NULL, 'abc', \
         'denied', 0, 0, 1.5, NULL, NULL, 'precondition 0: no')",
        params![id, time],
    )
    .expect("old receipt");
    drop(old);
    let all = crate::receipts::Filter::default();
    let before = crate::receipts::query::receipts(&path, &all).expect("reads version 3");
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].reason.as_deref(), Some("precondition 0: no"));
    assert_eq!(before[0].approval_decision, None);

    let log = ReceiptLog::open(&settings(path.clone())).expect("upgraded");
    let args = json!({});
    let approval = crate::receipts::ApprovalRecord {
        id: Some("ap-1".into()),
        decision: "approved",
        approver: Some("bob".into()),
        wait: Duration::from_millis(1500),
    };
    let mut approved = call("refund", &args);
    approved.approval = Some(&approval);
    assert!(log.record(&approved).await.is_some());
    let after = crate::receipts::query::receipts(&path, &all).expect("query version 4");
    assert_eq!(after.len(), 2);
    assert_eq!(after[0].id, id);
    assert_eq!(after[0].reason.as_deref(), Some("precondition 0: no"));
    assert_eq!(after[0].approver, None);
    assert_eq!(after[1].approval_id.as_deref(), Some("ap-1"));
    assert_eq!(after[1].approval_decision.as_deref(), Some("approved"));
    assert_eq!(after[1].approver.as_deref(), Some("bob"));
    assert_eq!(after[1].approval_wait_ms, Some(1500.0));
}
