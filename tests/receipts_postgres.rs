//! Receipts in PostgreSQL (`receipts: {url: postgres://…}`) against a real, private PostgreSQL
//! server and the real binary: receipts are in the database when the call is answered, concurrent
//! calls share commits, `narrowgate receipts` reads them with its filters, the schema is created on
//! first start and migrated from an older version, an unreachable or too new database is a
//! clear error at start, and replicas summarise the receipts for the status page's charts once.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::{
    BOB, Gateway, KEY, Postgres, call, callers, client, demo_stdio_config, echo_tool, free_port,
    receipts_command, receipts_json, slow_tool,
};
use serde_json::json;

fn contract() -> String {
    common::contract_file(
        "demo",
        &[
            &echo_tool("echo", 20, ""),
            &slow_tool("slow", "read", ""),
            "  fail:\n    privilege: read\n",
        ],
    )
}

/// alice may call everything, bob only `echo`.
fn config(receipts: &str) -> String {
    demo_stdio_config(&callers(&[("bob", BOB, "[echo]")]), receipts)
}

fn start(url: &str) -> Gateway {
    Gateway::start(
        &config(&format!(
            "receipts:\n  url: {url}\n  store_arguments: true\n"
        )),
        &[("demo.yaml", contract().as_str())],
    )
}

fn count(pg: &Postgres, db: &str) -> u64 {
    pg.value_in(db, "SELECT count(*)::text FROM receipts")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Proves: with `receipts.url`, every call's receipt is in PostgreSQL by the time the call is
/// answered (counted right after each answer, without waiting), with the caller, tool, outcome and
/// stored arguments; nothing is written to a SQLite file; concurrent calls share transactions
/// (fewer distinct inserting transactions than rows); and `narrowgate receipts --config` reads
/// them back with `--tool`, `--caller`, `--outcome`, `--since` and `--limit`.
#[tokio::test]
async fn receipts_land_in_postgresql_and_read_back_with_filters() {
    let pg = Postgres::start();
    let gw = start(&pg.url());
    let alice = client(&gw.url, KEY).await;
    let bob = client(&gw.url, BOB).await;

    call(&alice, "echo", json!({"message": "one"}))
        .await
        .expect("answered");
    assert_eq!(
        count(&pg, "postgres"),
        1,
        "the receipt is written before the answer"
    );
    call(&bob, "echo", json!({"message": "two"}))
        .await
        .expect("answered");
    assert_eq!(count(&pg, "postgres"), 2);
    let failed = call(&alice, "fail", json!({})).await.expect("answered");
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(count(&pg, "postgres"), 3);

    // 32 calls that all finish together: their receipts queue while one commit is under way.
    let alice = std::sync::Arc::new(alice);
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let alice = alice.clone();
        calls.spawn(async move { call(&alice, "slow", json!({"ms": 100})).await });
    }
    while let Some(answered) = calls.join_next().await {
        let answered = answered.expect("the call's task ends");
        assert!(answered.is_ok_and(|r| r.is_error != Some(true)));
    }
    assert_eq!(count(&pg, "postgres"), 35);
    let transactions: u64 = pg
        .value_in(
            "postgres",
            "SELECT count(DISTINCT xmin::text)::text FROM receipts WHERE tool = 'slow'",
        )
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        transactions < 32,
        "32 concurrent receipts took {transactions} transactions: they were not batched"
    );
    assert!(
        !gw.dir.path().join("data/receipts.db").exists(),
        "with receipts.url no SQLite file is written"
    );

    let stored = pg.value_in(
        "postgres",
        "SELECT arguments::text FROM receipts WHERE caller = 'bob'",
    );
    assert_eq!(stored.as_deref(), Some(r#"{"message": "two"}"#));

    let config = gw.config_path();
    let echo = receipts_json(&config, &["--tool", "echo"]);
    assert_eq!(echo.len(), 2, "{echo:?}");
    assert_eq!(echo[0]["caller"], "alice", "oldest first");
    assert_eq!(echo[1]["arguments"], json!({"message": "two"}));
    let by_bob = receipts_json(&config, &["--caller", "bob"]);
    assert_eq!(by_bob.len(), 1);
    assert_eq!(by_bob[0]["tool"], "echo");
    let errors = receipts_json(&config, &["--outcome", "tool_error"]);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["tool"], "fail");
    assert_eq!(receipts_json(&config, &["--since", "1h"]).len(), 35);
    let last = receipts_json(&config, &["--limit", "2"]);
    assert_eq!(last.len(), 2);
    assert!(last.iter().all(|r| r["tool"] == "slow"), "{last:?}");
    let (code, table, _) = receipts_command(&config, &["--caller", "bob"]);
    assert_eq!(code, 0);
    assert!(
        table.contains("bob") && table.contains("demo/echo"),
        "{table}"
    );
    // --db takes the URL too, without any configuration.
    let (code, stdout, stderr) = receipts_db(&pg.url(), &["--json", "--tool", "fail"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"tool\":\"fail\""), "{stdout}");
}

/// Proves: a database without the gateway's tables gets them at first start (the current schema
/// version),
/// and one left at version 1 by an older gateway is migrated in place: its receipts are kept and
/// read back, the version is the current one, and version 2's indexes exist.
#[tokio::test]
async fn the_schema_is_created_on_first_start_and_migrated_from_version_1() {
    let pg = Postgres::start();
    pg.batch("CREATE DATABASE fresh");
    pg.batch("CREATE DATABASE old");

    let fresh = start(&pg.url_of("fresh"));
    let current = narrowgate::harness::SCHEMA_VERSION.to_string();
    assert_eq!(version(&pg, "fresh").as_deref(), Some(current.as_str()));
    assert_eq!(count(&pg, "fresh"), 0);
    drop(fresh);

    pg.batch_in("old", narrowgate::harness::MIGRATIONS[0]);
    pg.batch_in(
        "old",
        "CREATE TABLE narrowgate_schema_version (version integer NOT NULL);
         INSERT INTO narrowgate_schema_version VALUES (1);
         INSERT INTO receipts VALUES ('00000000-0000-7000-8000-000000000001',
           '2025-01-01T00:00:00.000Z', 'alice', 'echo', 'demo', 'echo', NULL, 'sha256:00',
           'ok', 1, false, 1.5, NULL, NULL);",
    );
    assert_eq!(version(&pg, "old").as_deref(), Some("1"));
    let gw = start(&pg.url_of("old"));
    assert_eq!(version(&pg, "old").as_deref(), Some(current.as_str()));
    let indexes = pg.value_in(
        "old",
        "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes \
         WHERE tablename = 'receipts' AND indexname <> 'receipts_pkey'",
    );
    assert_eq!(
        indexes.as_deref(),
        Some("receipts_caller_id,receipts_tool_id")
    );
    let alice = client(&gw.url, KEY).await;
    call(&alice, "echo", json!({"message": "new"}))
        .await
        .expect("answered");
    let all = receipts_json(&gw.config_path(), &[]);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(
        all[0]["time"], "2025-01-01T00:00:00.000Z",
        "the old receipt is kept"
    );
    assert_eq!(all[1]["arguments"], json!({"message": "new"}));
}

/// Proves: a gateway whose `receipts.url` cannot be reached does not start: it exits with status
/// 1 naming the database (without its password) and what to check, instead of serving calls
/// that would leave no receipt; `narrowgate receipts` says the same; and a database whose schema is
/// newer than the gateway's is refused as clearly.
#[test]
fn an_unreachable_or_newer_database_is_a_clear_error_at_start() {
    let port = free_port();
    let url = format!("postgres://gw:s3cret@127.0.0.1:{port}/receipts");
    let (code, stderr) = serve_once(&url);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("postgres://gw@127.0.0.1:{port}/receipts"))
            && stderr.contains("receipts.url")
            && !stderr.contains("s3cret"),
        "{stderr}"
    );
    let (code, _, stderr) = receipts_db(&url, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("receipts.url") && !stderr.contains("s3cret"),
        "{stderr}"
    );

    let pg = Postgres::start();
    pg.batch(
        "CREATE TABLE narrowgate_schema_version (version integer NOT NULL);
         INSERT INTO narrowgate_schema_version VALUES (99);",
    );
    let (code, stderr) = serve_once(&pg.url());
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("schema version 99") && stderr.contains("upgrade narrowgate"),
        "{stderr}"
    );
}

/// Proves: when PostgreSQL restarts under a running gateway (every connection cut), the next
/// call's receipt is still written before its answer: the writer finds its connection broken,
/// opens a new one and sends the batch again.
#[tokio::test]
async fn receipts_survive_a_postgresql_restart() {
    let mut pg = Postgres::start();
    let gw = start(&pg.url());
    let alice = client(&gw.url, KEY).await;
    call(&alice, "echo", json!({"message": "before"}))
        .await
        .expect("answered");
    assert_eq!(count(&pg, "postgres"), 1);
    pg.restart();
    call(&alice, "echo", json!({"message": "after"}))
        .await
        .expect("answered");
    assert_eq!(
        count(&pg, "postgres"),
        2,
        "the receipt after the restart is written\n{}",
        gw.log()
    );
    assert!(!gw.log().contains("RECEIPT NOT WRITTEN"), "{}", gw.log());
}

fn version(pg: &Postgres, db: &str) -> Option<String> {
    pg.value_in(
        db,
        "SELECT max(version)::text FROM narrowgate_schema_version",
    )
}

/// `narrowgate serve` with `receipts.url: url`, expected to exit: (status, stderr).
fn serve_once(url: &str) -> (i32, String) {
    let dir = common::ConfigDir::new(
        &config(&format!("receipts:\n  url: {url}\n")),
        &[("demo.yaml", contract().as_str())],
    );
    let ran = common::process::run(
        Command::new(env!("CARGO_BIN_EXE_narrowgate"))
            .args(["serve", "--config"])
            .arg(dir.config())
            .env("NARROWGATE_LISTEN", format!("127.0.0.1:{}", free_port())),
        Duration::from_secs(30),
    );
    (ran.code.unwrap_or(-1), ran.stderr)
}

/// `narrowgate receipts --db DB ARGS…`: (status, stdout, stderr).
fn receipts_db(db: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args(["receipts", "--db", db])
        .args(args)
        .output()
        .expect("run narrowgate receipts");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Receipts written every 20 s over the last three hours, straight into the database (as replicas
/// would have written them): tools `echo` and `add` of `demo`, and a made-up name with no
/// upstream; outcomes and durations vary.
const PAST_RECEIPTS: &str = "
INSERT INTO receipts (id, time, caller, tool, upstream, arguments_digest, outcome, attempts,
    replayed, duration_ms)
SELECT lpad(to_hex(ms >> 16), 8, '0') || '-' || lpad(to_hex(ms & 65535), 4, '0')
         || '-7000-8000-' || lpad(to_hex(n), 12, '0'),
       to_char(to_timestamp(ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
       'alice',
       (ARRAY['echo', 'add', 'made-up'])[n % 3 + 1],
       CASE WHEN n % 3 = 2 THEN NULL ELSE 'demo' END,
       '',
       (ARRAY['ok', 'ok', 'tool_error', 'rate_limited', 'ok', 'timeout', 'denied'])[n % 7 + 1],
       1, false, (n % 50) * 1.7 + 0.3
FROM (SELECT n, (extract(epoch FROM clock_timestamp()) * 1000)::bigint - n * 20000 AS ms
      FROM generate_series(1, 540) AS n) AS t;
";

/// Each receipt's minute (from its UUIDv7 id) and its tool, as the roll-up reads them.
fn receipt_minutes(pg: &Postgres) -> Vec<(i64, String)> {
    pg.rows_in("postgres", "SELECT id, tool FROM receipts")
        .into_iter()
        .filter_map(|row| {
            let id = row[0].clone()?;
            let millis = i64::from_str_radix(&id[..8], 16).ok()? << 16
                | i64::from_str_radix(&id[9..13], 16).ok()?;
            Some((millis / 60_000, row[1].clone()?))
        })
        .collect()
}

/// Proves: on PostgreSQL, two replicas started together on a database holding three hours of
/// receipts summarise every ended minute exactly once (the summaries' calls add up to the
/// receipts of those minutes, not twice as many), and every quarter hour they completed too;
/// `narrowgate receipts --summary --json --db URL` counts the same calls per tool from the raw
/// receipts, with the latency percentiles of the calls sent upstream.
#[tokio::test]
async fn replicas_summarise_each_minute_once() {
    let pg = Postgres::start();
    drop(start(&pg.url())); // creates the schema
    pg.batch(PAST_RECEIPTS);
    pg.batch(
        "DELETE FROM receipt_minutes_done; DELETE FROM receipt_minutes; \
         DELETE FROM receipt_quarters;",
    );
    let replicas = [start(&pg.url()), start(&pg.url())];
    let now_minute = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64 / 60_000)
            .unwrap_or(0)
    };
    let until = || {
        pg.value_in(
            "postgres",
            "SELECT coalesce(max(until), 0)::text FROM receipt_minutes_done",
        )
        .and_then(|u| u.parse::<i64>().ok())
        .unwrap_or(0)
    };
    replicas[0]
        .retry_until(
            Duration::from_secs(60),
            "the roll-up caught up with the last three hours",
            async || match until() {
                u if u >= now_minute() - 2 => Ok(()),
                u => Err(format!("until {u}, now {}", now_minute())),
            },
        )
        .await;
    let until = until();
    let minutes = receipt_minutes(&pg);
    let sum = |table: &str| -> i64 {
        pg.value_in(
            "postgres",
            &format!("SELECT coalesce(sum(calls), 0)::text FROM {table}"),
        )
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
    };
    let ended = minutes.iter().filter(|(m, _)| *m < until).count() as i64;
    assert!(
        ended > 500,
        "three hours of receipts, all but the last minutes: {ended}"
    );
    assert_eq!(sum("receipt_minutes"), ended, "each ended minute once");
    let quarters = minutes.iter().filter(|(m, _)| *m < until / 15 * 15).count() as i64;
    assert_eq!(
        sum("receipt_quarters"),
        quarters,
        "each completed quarter once"
    );

    let (code, stdout, stderr) = receipts_db(&pg.url(), &["--summary", "--since", "24h", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    for tool in ["echo", "add", "made-up"] {
        let expected = minutes.iter().filter(|(_, t)| t == tool).count();
        let row = summary["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == tool))
            .unwrap_or_else(|| panic!("{tool} in {summary}"));
        assert_eq!(row["calls"], expected, "{row}");
        let outcomes: u64 = row["outcomes"]
            .as_object()
            .map(|o| o.values().filter_map(|v| v.as_u64()).sum())
            .unwrap_or(0);
        assert_eq!(outcomes as usize, expected, "{row}");
    }
    let names: Vec<&str> = summary["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["add", "echo", "made-up"], "by name");
    assert_eq!(summary["tools"][2]["upstream"], serde_json::Value::Null);
    let demo = &summary["upstreams"][0];
    assert_eq!(demo["name"], "demo");
    let (p50, p99) = (demo["p50_ms"].as_f64(), demo["p99_ms"].as_f64());
    assert!(
        matches!((p50, p99), (Some(a), Some(b)) if 0.3 <= a && a <= b && b <= 90.0),
        "{demo}"
    );
}
