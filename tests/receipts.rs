//! Receipts and `narrowgate receipts` against the real binary and the
//! demo upstream over stdio: one receipt per call for every outcome, durability under SIGKILL,
//! redaction, retention, and the command's filters.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    BAD_WEATHER_TOOL, BOB, CAROL, Gateway, KEY, Raw, call, callers, client, demo_stdio_config,
    receipts_command, receipts_json, slow_tool,
};
use narrowgate::harness::ContractSet;
use narrowgate::harness::sha256_of;
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// alice may call everything, bob only `echo`, carol only `fail`.
fn config(extra: &str) -> String {
    let callers = callers(&[("bob", BOB, "[echo]"), ("carol", CAROL, "[fail]")]);
    demo_stdio_config(&callers, extra)
}

const CONTRACT_START: &str = r#"upstream: demo
tools:
  echo:
    privilege: read
    input:
      type: object
      properties:
        message: { type: string, maxLength: 20 }
        token: { type: string }
      required: [message]
      additionalProperties: false
    redact: [/token]
  fail:
    privilege: read
  add:
    privilege: read
    rate: 1/m
    input:
      type: object
      properties: { a: { type: number }, b: { type: number } }
      required: [a, b]
      additionalProperties: false
"#;

/// echo (with a redacted `token`), fail, add (one call a minute), bad_weather, slow, slow_write
/// (timing out, unsure) and crash.
fn contract() -> String {
    [
        CONTRACT_START,
        BAD_WEATHER_TOOL,
        &slow_tool("slow", "read", ""),
        &slow_tool("slow_write", "write", ""),
        "  crash:\n    privilege: read\n",
    ]
    .concat()
}

fn start(extra: &str) -> Gateway {
    Gateway::start(&config(extra), &[("demo.yaml", contract().as_str())])
}

/// Proves: every outcome a real call can produce today leaves exactly one receipt, in the default
/// database next to the config, with the caller, tool, upstream and upstream tool, the contract's
/// digest, the arguments' digest, attempts, replayed flag and a plausible duration; JSON-RPC
/// -32602 answers (unknown tool, rejected arguments on an old protocol) included.
#[tokio::test]
async fn every_outcome_leaves_exactly_one_receipt() {
    let gw = start("");
    let alice = client(&gw.url, KEY).await;
    let carol = client(&gw.url, CAROL).await;
    let ok = call(&alice, "echo", json!({"message": "hi"})).await;
    assert!(ok.is_ok_and(|r| r.is_error != Some(true)));
    let failed = call(&alice, "fail", json!({})).await;
    assert!(failed.is_ok_and(|r| r.is_error == Some(true)));
    let sum = json!({"a": 1, "b": 2});
    let added = call(&alice, "add", sum.clone()).await;
    let added = added.expect("answered");
    assert!(added.is_error != Some(true), "{added:?}");
    let limited = call(&alice, "add", sum.clone()).await;
    assert!(limited.is_ok_and(|r| r.is_error == Some(true)));
    let unknown = call(&alice, "nope", json!({"x": 1})).await;
    assert!(unknown.is_err_and(|e| e.contains("Unknown tool")));
    let forbidden = call(&carol, "echo", json!({"message": "hi"})).await;
    assert!(forbidden.is_err_and(|e| e.contains("Unknown tool")));
    let too_long = json!({"message": "this message is far too long"});
    let rejected = call(&alice, "echo", too_long.clone()).await;
    assert!(rejected.is_ok_and(|r| r.is_error == Some(true)));
    // The same rejection on 2025-06-18 is a JSON-RPC -32602 error, and still leaves a receipt.
    let reply = Raw::new(&gw.url)
        .call_in_new_session(KEY, "2025-06-18", "echo", too_long.clone())
        .await;
    assert_eq!(reply.message()["error"]["code"], -32602, "{reply:?}");
    let bad = call(&alice, "bad_weather", json!({"location": "Chicago"})).await;
    assert!(bad.is_ok_and(|r| r.is_error == Some(true)));
    let timed_out = call(&alice, "slow", json!({"ms": 5000})).await;
    assert!(timed_out.is_ok_and(|r| r.is_error == Some(true)));
    let unsure = call(&alice, "slow_write", json!({"ms": 5000})).await;
    assert!(unsure.is_ok_and(|r| r.is_error == Some(true)));
    // Last: the upstream restarts afterwards.
    let crashed = call(&alice, "crash", json!({})).await;
    assert!(crashed.is_ok_and(|r| r.is_error == Some(true)));

    assert!(
        gw.dir.path().join("data/receipts.db").is_file(),
        "without a receipts block the database is data/receipts.db next to the config"
    );
    let receipts = receipts_json(&gw.config_path(), &[]);
    let contracts =
        ContractSet::load_dir(&gw.dir.path().join("contracts")).expect("contracts load");
    let digest = |tool: &str| contracts.tools[tool].digest.clone();
    // (caller, tool, outcome, contract, attempts, arguments)
    let expected = [
        (
            "alice",
            "echo",
            "ok",
            Some("echo"),
            1,
            json!({"message": "hi"}),
        ),
        ("alice", "fail", "tool_error", Some("fail"), 1, json!({})),
        ("alice", "add", "ok", Some("add"), 1, sum.clone()),
        ("alice", "add", "rate_limited", Some("add"), 0, sum),
        ("alice", "nope", "denied", None, 0, json!({"x": 1})),
        (
            "carol",
            "echo",
            "denied",
            Some("echo"),
            0,
            json!({"message": "hi"}),
        ),
        (
            "alice",
            "echo",
            "rejected_input",
            Some("echo"),
            0,
            too_long.clone(),
        ),
        ("alice", "echo", "rejected_input", Some("echo"), 0, too_long),
        (
            "alice",
            "bad_weather",
            "rejected_output",
            Some("bad_weather"),
            1,
            json!({"location": "Chicago"}),
        ),
        (
            "alice",
            "slow",
            "timeout",
            Some("slow"),
            1,
            json!({"ms": 5000}),
        ),
        (
            "alice",
            "slow_write",
            "unknown",
            Some("slow_write"),
            1,
            json!({"ms": 5000}),
        ),
        (
            "alice",
            "crash",
            "upstream_error",
            Some("crash"),
            1,
            json!({}),
        ),
    ];
    assert_eq!(
        receipts.len(),
        expected.len(),
        "one receipt per call: {receipts:#?}"
    );
    let mut ids = BTreeSet::new();
    for (receipt, (caller, tool, outcome, contract, attempts, args)) in
        receipts.iter().zip(expected)
    {
        let context = format!("{receipt:#}");
        assert_eq!(receipt["caller"], caller, "{context}");
        assert_eq!(receipt["tool"], tool, "{context}");
        assert_eq!(receipt["outcome"], outcome, "{context}");
        assert_eq!(receipt["attempts"], attempts, "{context}");
        assert_eq!(receipt["replayed"], false, "{context}");
        // Null until telemetry provides one; then a W3C trace id.
        let trace_id = receipt["trace_id"].as_str().unwrap_or("0");
        assert!(
            receipt["trace_id"].is_null()
                || (trace_id.len() == 32
                    && trace_id.bytes().all(|b| b.is_ascii_hexdigit())
                    && trace_id.bytes().any(|b| b != b'0')),
            "{context}"
        );
        assert_eq!(
            receipt["arguments"],
            Value::Null,
            "arguments are not kept by default: {context}"
        );
        // Only under a contract: an unknown tool's arguments are not even digested.
        let expected_digest = contract.map_or(Value::Null, |_| json!(sha256_of(&args)));
        assert_eq!(receipt["arguments_digest"], expected_digest, "{context}");
        match contract {
            Some(name) => {
                assert_eq!(receipt["contract_digest"], digest(name), "{context}");
                assert_eq!(receipt["upstream"], "demo", "{context}");
                let upstream_tool = if name == "slow_write" { "slow" } else { name };
                assert_eq!(receipt["upstream_tool"], upstream_tool, "{context}");
            }
            None => {
                for field in ["contract_digest", "upstream", "upstream_tool"] {
                    assert_eq!(receipt[field], Value::Null, "{field}: {context}");
                }
            }
        }
        let time = receipt["time"].as_str().unwrap_or_default();
        assert!(
            time.len() == 24 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
            "{context}"
        );
        assert!(
            ids.insert(receipt["id"].as_str().unwrap_or_default().to_string()),
            "ids are unique: {context}"
        );
        let ms = receipt["duration_ms"].as_f64().unwrap_or(-1.0);
        let plausible = match outcome {
            "timeout" | "unknown" => (250.0..5000.0).contains(&ms),
            _ => (0.0..5000.0).contains(&ms),
        };
        assert!(plausible, "duration {ms}: {context}");
    }
}

/// Proves: `narrowgate receipts` filters by tool, caller, outcome and age, keeps the latest N,
/// prints a table by default, and refuses an unknown outcome name listing the valid ones.
#[tokio::test]
async fn the_receipts_command_filters_while_the_gateway_runs() {
    let gw = start("");
    let alice = client(&gw.url, KEY).await;
    let bob = client(&gw.url, BOB).await;
    for message in ["one", "two", "three"] {
        call(&alice, "echo", json!({"message": message}))
            .await
            .expect("echo");
    }
    call(&alice, "fail", json!({})).await.expect("fail answers");
    call(&bob, "fail", json!({})).await.expect_err("denied");
    let config = gw.config_path();
    let count = |args: &[&str]| receipts_json(&config, args).len();
    assert_eq!(count(&[]), 5);
    assert_eq!(count(&["--tool", "echo"]), 3);
    assert_eq!(count(&["--caller", "bob"]), 1);
    assert_eq!(count(&["--outcome", "denied"]), 1);
    assert_eq!(count(&["--outcome", "tool_error", "--caller", "alice"]), 1);
    assert_eq!(count(&["--outcome", "timeout"]), 0);
    assert_eq!(count(&["--since", "1h"]), 5);
    let latest = receipts_json(&config, &["--limit", "2"]);
    assert_eq!(
        latest
            .iter()
            .map(|r| r["caller"].as_str().unwrap_or_default())
            .collect::<Vec<_>>(),
        ["alice", "bob"],
        "the latest two, oldest first"
    );
    // The receipts age past `--since 1s`: no more than a second or two, and then none match.
    gw.retry_until(
        Duration::from_secs(10),
        "every receipt older than --since 1s",
        async || match count(&["--since", "1s"]) {
            0 => Ok(()),
            n => Err(format!("{n} receipts within the last second")),
        },
    )
    .await;
    // `--db` reads the file without loading any configuration (here: one that does not exist).
    let db = config
        .parent()
        .expect("config dir")
        .join("data/receipts.db");
    let direct = receipts_json(
        &config.with_file_name("absent.yaml"),
        &["--db", &db.display().to_string(), "--caller", "alice"],
    );
    assert_eq!(direct.len(), 4);

    let (code, table, _) = receipts_command(&config, &["--tool", "fail"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[0].starts_with("TIME") && lines[0].contains("OUTCOME"),
        "{table}"
    );
    assert!(
        lines[1].contains("alice") && lines[1].contains("tool_error"),
        "{table}"
    );
    assert!(
        lines[2].contains("bob") && lines[2].contains("denied"),
        "{table}"
    );

    let (code, _, stderr) = receipts_command(&config, &["--outcome", "okay"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("okay") && stderr.contains("rejected_output"),
        "{stderr}"
    );
    let (code, _, stderr) = receipts_command(&config, &["--since", "5 minutes"]);
    assert_eq!(code, 2, "{stderr}");
}

/// Proves: `narrowgate receipts` needs only the environment of what it reads: a caller's key
/// variable unset (as in a second container without the gateway's environment) does not stop it,
/// and it reads the configured database (none here: the error is the database's own, not the
/// key's); `--db` reads a database without the configuration at all.
#[test]
fn the_receipts_command_needs_only_what_it_reads() {
    let config_dir = tempfile::tempdir().expect("tempdir");
    let db = config_dir.path().join("receipts.db");
    let config = config_dir.path().join("narrowgate.yaml");
    let yaml = format!(
        "callers:\n  - name: ops\n    api_key_env: NARROWGATE_TEST_UNSET_KEY\n    tools: []\n\
         receipts:\n  path: {}\n",
        db.display()
    );
    std::fs::write(&config, yaml).expect("write config");
    for args in [vec![], vec!["--db".to_string(), db.display().to_string()]] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, stderr) = receipts_command(&config, &args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("no receipts database")
                && !stderr.contains("NARROWGATE_TEST_UNSET_KEY"),
            "{args:?}: {stderr}"
        );
    }
}

/// Proves: a gateway killed with SIGKILL in the middle of a load of concurrent calls has a receipt
/// for every call whose answer a client received (receipts are on disk before answers are sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_answered_call_survives_sigkill() {
    let db_dir = tempfile::tempdir().expect("tempdir");
    let db = db_dir.path().join("receipts.db");
    let gw = start(&format!(
        "receipts:\n  path: {}\n  store_arguments: true\n",
        db.display()
    ));
    const CLIENTS: usize = 12;
    let answered = Arc::new(Mutex::new(Vec::<String>::new()));
    let killed = CancellationToken::new();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let url = gw.url.clone();
        let answered = answered.clone();
        let killed = killed.clone();
        // Each client calls in a loop until the kill; returns how many calls it sent, or why a
        // call failed before the kill (a bug: nothing here should fail on its own).
        tasks.push(tokio::spawn(async move {
            let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(KEY);
            let client = match ().serve(StreamableHttpClientTransport::from_config(config)).await {
                Ok(client) => client,
                Err(_) if killed.is_cancelled() => return Ok(0),
                Err(e) => return Err(format!("client {c} cannot connect: {e}")),
            };
            let mut sent = 0usize;
            loop {
                let message = format!("c{c}-{sent}");
                sent += 1;
                // A call cut off by the kill may never be answered: give up 3 s after it (a
                // deadline, not a wait for anything).
                let gave_up = async {
                    killed.cancelled().await;
                    tokio::time::sleep(Duration::from_secs(3)).await;
                };
                let reply = tokio::select! {
                    reply = call(&client, "echo", json!({"message": message})) => Some(reply),
                    () = gave_up => None,
                };
                match reply {
                    Some(Ok(r)) if r.is_error != Some(true) => {
                        answered.lock().expect("lock").push(message);
                    }
                    _ if killed.is_cancelled() => return Ok(sent),
                    other => {
                        return Err(format!("call {message} failed before the kill: {other:?}"));
                    }
                }
            }
        }));
    }
    // Let the load run, then kill the gateway (Drop sends SIGKILL) while calls are in flight.
    // Polled with a deadline; past it the test goes on and judges the load it got (>= 50).
    let deadline = Instant::now() + Duration::from_secs(60);
    while answered.lock().expect("lock").len() < 300 && Instant::now() < deadline {
        tokio::time::sleep(common::POLL_EVERY).await;
    }
    killed.cancel();
    drop(gw);
    let mut attempted = 0;
    for task in tasks {
        attempted += task
            .await
            .expect("client task")
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let answered = answered.lock().expect("lock").clone();
    assert!(answered.len() >= 50, "too little load: {}", answered.len());

    // Read them back with the command, from a config that only names the database.
    let config = db_dir.path().join("after-crash.yaml");
    std::fs::write(&config, "receipts:\n  path: receipts.db\n").expect("write config");
    let receipts = receipts_json(&config, &[]);
    let recorded: BTreeSet<String> = receipts
        .iter()
        .filter_map(|r| r["arguments"]["message"].as_str().map(str::to_string))
        .collect();
    let missing: Vec<&String> = answered.iter().filter(|m| !recorded.contains(*m)).collect();
    eprintln!(
        "SIGKILL under load: {CLIENTS} clients, {attempted} calls sent, {} answered, {} receipts",
        answered.len(),
        receipts.len()
    );
    assert!(
        missing.is_empty(),
        "{} answered calls have no receipt, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    assert!(receipts.len() >= answered.len());
    assert!(
        receipts.len() <= attempted,
        "more receipts than calls: {} > {attempted}",
        receipts.len()
    );
}

/// Every file under `dir`, recursively, with its bytes.
fn files_under(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path) {
                files.insert(path.display().to_string(), bytes);
            }
        }
    }
    files
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Proves: a value at a contract's `redact` pointer is found nowhere in the database files (main,
/// -wal, -shm) nor in the gateway log, with `store_arguments` false and true, for answered,
/// rejected, denied and unknown-tool calls; the digest ignores the redacted value but not the
/// others, and stored arguments carry the marker.
#[tokio::test]
async fn redacted_values_are_never_stored_or_logged() {
    for store in [false, true] {
        let gw = start(&format!("receipts:\n  store_arguments: {store}\n"));
        let alice = client(&gw.url, KEY).await;
        let carol = client(&gw.url, CAROL).await;
        let secret = |n: u32| format!("SECRET-TOKEN-{n}-{store}");
        for (who, tool, args) in [
            (&alice, "echo", json!({"message": "m1", "token": secret(1)})),
            (&alice, "echo", json!({"message": "m1", "token": secret(2)})),
            (&alice, "echo", json!({"message": "m2", "token": secret(3)})),
            (
                &alice,
                "echo",
                json!({"message": "far too long to be accepted", "token": secret(4)}),
            ),
            (&carol, "echo", json!({"message": "m1", "token": secret(5)})),
            (&alice, "nope", json!({"token": secret(6)})),
        ] {
            let _ = call(who, tool, args).await;
        }
        let receipts = receipts_json(&gw.config_path(), &[]);
        assert_eq!(receipts.len(), 6, "{receipts:#?}");
        let digest = |i: usize| receipts[i]["arguments_digest"].clone();
        assert_eq!(digest(0), digest(1), "only the redacted value differs");
        assert_ne!(digest(0), digest(2), "the message differs");
        assert_eq!(digest(0), digest(4), "denied calls are redacted too");
        assert_eq!(
            digest(0),
            sha256_of(&json!({"message": "m1", "token": "[redacted]"}))
        );
        if store {
            assert_eq!(
                receipts[0]["arguments"],
                json!({"message": "m1", "token": "[redacted]"})
            );
            assert_eq!(receipts[3]["outcome"], "rejected_input");
            assert_eq!(receipts[3]["arguments"]["token"], "[redacted]");
            assert_eq!(
                receipts[5]["arguments"],
                Value::Null,
                "arguments of an unknown tool are not kept: nothing says what to redact"
            );
        } else {
            assert!(receipts.iter().all(|r| r["arguments"].is_null()));
        }
        let mut files = files_under(&gw.dir.path().join("data"));
        assert!(
            files.keys().any(|f| f.ends_with("receipts.db-wal")),
            "the WAL is checked too: {:?}",
            files.keys()
        );
        files.insert("gateway.log".into(), gw.log().into_bytes());
        for n in 1..=6 {
            for (file, bytes) in &files {
                assert!(
                    !contains(bytes, &secret(n)),
                    "{} found in {file}",
                    secret(n)
                );
            }
        }
    }
}

/// Proves: with `retention`, receipts older than it are deleted while the gateway runs, and newer
/// ones are kept.
#[tokio::test]
async fn retention_prunes_old_receipts() {
    let gw = start("receipts:\n  retention: 2s\n");
    let alice = client(&gw.url, KEY).await;
    call(&alice, "echo", json!({"message": "old"}))
        .await
        .expect("echo");
    let config = gw.config_path();
    assert_eq!(receipts_json(&config, &[]).len(), 1);
    gw.retry_until(
        Duration::from_secs(15),
        "the old receipt's pruning",
        async || match receipts_json(&config, &[]).as_slice() {
            [] => Ok(()),
            left => Err(format!("{left:?}")),
        },
    )
    .await;
    call(&alice, "echo", json!({"message": "new"}))
        .await
        .expect("echo");
    let receipts = receipts_json(&config, &[]);
    assert_eq!(receipts.len(), 1, "{receipts:#?}");
    assert_eq!(
        receipts[0]["arguments_digest"],
        sha256_of(&json!({"message": "new"}))
    );
}

/// Proves: `narrowgate receipts --summary` counts, per tool and per upstream, exactly the calls the
/// listing lists for the same window, by outcome (every outcome named, zeros included); a name
/// no contract has is a tool without upstream and counts in no upstream; latency percentiles
/// cover only calls sent upstream (none for a name only ever denied) and p50 ≤ p99; the table
/// form names every tool; and the listing's filters are refused beside it (exit 2).
#[tokio::test]
async fn the_summary_counts_what_the_listing_lists() {
    let gw = start("");
    let alice = client(&gw.url, KEY).await;
    for message in ["a", "b", "c"] {
        let _ = call(&alice, "echo", json!({"message": message})).await;
    }
    let _ = call(
        &alice,
        "echo",
        json!({"message": "far too long for the contract"}),
    )
    .await;
    for _ in 0..2 {
        let _ = call(&alice, "fail", json!({})).await;
        let _ = call(&alice, "add", json!({"a": 1, "b": 2})).await;
    }
    let _ = call(&alice, "nope", json!({})).await;
    let _ = alice.cancel().await;
    let config = gw.config_path();
    let listed = receipts_json(&config, &["--since", "1h"]);
    assert_eq!(listed.len(), 9, "{listed:#?}");
    let (code, stdout, stderr) =
        receipts_command(&config, &["--summary", "--since", "1h", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let summary: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(summary["since_seconds"], 3600);
    let mut expected: BTreeMap<(String, String), u64> = BTreeMap::new();
    for r in &listed {
        let key = (
            r["tool"].as_str().unwrap_or("").to_string(),
            r["outcome"].as_str().unwrap_or("").to_string(),
        );
        *expected.entry(key).or_default() += 1;
    }
    let tools = summary["tools"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["add", "echo", "fail", "nope"]);
    for tool in &tools {
        let name = tool["name"].as_str().unwrap_or("");
        let outcomes = tool["outcomes"].as_object().cloned().unwrap_or_default();
        assert_eq!(outcomes.len(), 9, "every outcome named: {tool}");
        for (outcome, n) in outcomes {
            let listed = expected
                .get(&(name.to_string(), outcome.clone()))
                .copied()
                .unwrap_or(0);
            assert_eq!(n, listed, "{name} {outcome}");
        }
    }
    assert_eq!(tools[1]["outcomes"]["rejected_input"], 1);
    assert_eq!(tools[0]["outcomes"]["rate_limited"], 1);
    let nope = &tools[3];
    assert_eq!(nope["upstream"], Value::Null);
    assert_eq!(nope["outcomes"]["denied"], 1);
    assert_eq!(
        nope["p50_ms"],
        Value::Null,
        "a denied call never reached an upstream"
    );
    let demo = &summary["upstreams"][0];
    assert_eq!(demo["name"], "demo");
    assert_eq!(demo["calls"], 8, "every call but the made-up name's");
    let (p50, p99) = (demo["p50_ms"].as_f64(), demo["p99_ms"].as_f64());
    assert!(
        matches!((p50, p99), (Some(a), Some(b)) if 0.0 < a && a <= b),
        "{demo}"
    );

    let (code, table, _) = receipts_command(&config, &["--summary"]);
    assert_eq!(code, 0);
    for name in [
        "demo",
        "add",
        "echo",
        "fail",
        "nope",
        "RATE_LIMITED",
        "P99_MS",
    ] {
        assert!(table.contains(name), "{name} in {table}");
    }
    let (code, _, stderr) = receipts_command(&config, &["--summary", "--tool", "echo"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--tool"), "{stderr}");
}
