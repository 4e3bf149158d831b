//! `when` preconditions against the real binary: a true one lets the call through, a false one
//! answers its message (outcome `denied`, the reason in the receipt), one that cannot be evaluated
//! denies without echoing the arguments, and one that does not compile stops the gateway loading.

use crate::common;
use crate::otel;

use std::process::Command;
use std::time::Duration;

use common::{
    BOB, ConfigDir, Gateway, KEY, call_answered, call_ok, client, contract_file, counter,
    demo_stdio_config, hash_key, receipts_command, receipts_json, text_of,
};
use serde_json::{Value, json};

/// `capped_count` (the demo counter) may wait at most 10 ms unless the caller has the finance
/// role; `broken_count` compares a number with a string (a CEL type error).
const CONTRACT: &str = r#"  capped_count:
    upstream_tool: counter
    privilege: write
    input: { type: object, properties: { delay_ms: { type: integer } }, additionalProperties: false }
    when:
      - expr: "tool.name == 'capped_count' && caller.name != ''"
        message: never shown
      - expr: "!has(args.delay_ms) || args.delay_ms <= 10 || 'finance' in caller.roles"
        message: waits over 10 ms need the finance role
  broken_count:
    upstream_tool: counter
    privilege: write
    input: { type: object, properties: { delay_ms: { type: integer } }, additionalProperties: false }
    when:
      - expr: "args.delay_ms > 'ten'"
        message: never shown either
  peek_counter:
    privilege: read
"#;

/// alice (no roles) and bob (role `finance`), both allowed every tool.
fn callers() -> String {
    format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n  \
         - name: bob\n    api_key_sha256: {}\n    tools: ['*']\n    roles: [finance]\n",
        hash_key(KEY),
        hash_key(BOB)
    )
}

fn start() -> Gateway {
    Gateway::start(
        &demo_stdio_config(&callers(), ""),
        &[("demo.yaml", &contract_file("demo", &[CONTRACT]))],
    )
}

/// The `narrowgate.precondition` events of the SERVER spans of `tool` among `spans`, as
/// (outcome, index).
fn precondition_events(spans: &[Value], tool: &str) -> Vec<(String, Option<String>)> {
    let name = format!("tools/call {tool}");
    spans
        .iter()
        .filter(|s| s["name"] == name.as_str() && s["kind"] == "SPAN_KIND_SERVER")
        .flat_map(|s| s["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["name"] == "narrowgate.precondition")
        .map(|e| {
            let attribute = |k: &str| e["attributes"][k].as_str().map(str::to_string);
            (attribute("outcome").unwrap_or_default(), attribute("index"))
        })
        .collect()
}

/// Proves: each decision is an event `narrowgate.precondition` on the call's SERVER span, with
/// its outcome (`passed`, `false`, `unevaluable`) and the index of the one that denied.
#[tokio::test]
async fn the_decision_is_a_span_event() {
    let collector = otel::Collector::start();
    let config = demo_stdio_config(
        &callers(),
        &format!(
            "telemetry:\n  service_name: gw-when\n  otlp_endpoint: {}\n  otlp_protocol: http/protobuf\n",
            collector.http
        ),
    );
    let gateway = Gateway::spawn(
        &config,
        &[("demo.yaml", &contract_file("demo", &[CONTRACT]))],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    gateway.wait_ready(Duration::from_secs(60));
    let alice = client(&gateway.url, KEY).await;
    call_ok(&alice, "capped_count", json!({"delay_ms": 1})).await;
    call_answered(&alice, "capped_count", json!({"delay_ms": 99})).await;
    call_answered(&alice, "broken_count", json!({"delay_ms": 1})).await;
    let spans = collector
        .wait_for("the three calls' spans", |spans| {
            precondition_events(spans, "capped_count").len() == 2
                && precondition_events(spans, "broken_count").len() == 1
        })
        .await;
    let mut capped = precondition_events(&spans, "capped_count");
    capped.sort();
    assert_eq!(
        capped,
        [
            ("false".to_string(), Some("1".to_string())),
            ("passed".to_string(), None)
        ]
    );
    assert_eq!(
        precondition_events(&spans, "broken_count"),
        [("unevaluable".to_string(), Some("0".to_string()))]
    );
}

/// Proves: a call whose preconditions hold reaches the upstream; a false one is a tool error with
/// its message, never reaches the upstream, and its receipt (outcome `denied`) names the
/// precondition and message, in `--json` and in the table; the same call by a caller with the
/// role goes through.
#[tokio::test]
async fn true_passes_false_denies_with_its_message_and_receipt() {
    let gateway = start();
    let alice = client(&gateway.url, KEY).await;
    let before = counter(&alice).await;
    call_ok(&alice, "capped_count", json!({"delay_ms": 5})).await;
    assert_eq!(counter(&alice).await, before + 1);

    let denied = call_answered(&alice, "capped_count", json!({"delay_ms": 50})).await;
    assert_eq!(denied.is_error, Some(true), "{denied:?}");
    assert_eq!(text_of(&denied), "waits over 10 ms need the finance role");
    assert_eq!(counter(&alice).await, before + 1, "a denied call ran");

    let bob = client(&gateway.url, BOB).await;
    call_ok(&bob, "capped_count", json!({"delay_ms": 50})).await;
    assert_eq!(counter(&bob).await, before + 2);

    let receipts = receipts_json(&gateway.config_path(), &["--outcome", "denied"]);
    assert_eq!(receipts.len(), 1, "{receipts:?}");
    assert_eq!(
        receipts[0]["reason"],
        json!("precondition 1: waits over 10 ms need the finance role")
    );
    assert_eq!(receipts[0]["attempts"], json!(0));
    let (code, table, _) = receipts_command(&gateway.config_path(), &["--outcome", "denied"]);
    assert_eq!(code, 0);
    assert!(
        table.contains("REASON") && table.contains("precondition 1: waits over 10 ms"),
        "{table}"
    );
}

/// Proves: a precondition that cannot be evaluated (a type error) denies the call (fail
/// closed), saying it could not be evaluated without echoing the arguments, and the call never
/// reaches the upstream.
#[tokio::test]
async fn an_expression_that_fails_to_evaluate_denies() {
    let gateway = start();
    let alice = client(&gateway.url, KEY).await;
    let before = counter(&alice).await;
    let r = call_answered(&alice, "broken_count", json!({"delay_ms": 4321})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let text = text_of(&r);
    assert!(
        text.contains("could not be evaluated") && !text.contains("4321"),
        "{text}"
    );
    assert_eq!(counter(&alice).await, before, "an unevaluable call ran");
    let receipts = receipts_json(&gateway.config_path(), &["--outcome", "denied"]);
    assert_eq!(
        receipts[0]["reason"],
        json!("precondition 0 could not be evaluated")
    );
    // As a word of its own: random ids (trace, receipt, JSON-RPC) may hold the digits.
    assert!(
        !gateway
            .log()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| word == "4321"),
        "the log shows an argument value"
    );
}

/// Proves: an expression that does not compile is a load error naming the file, the tool and
/// the expression's index: `check` exits 2 saying so, and `serve` refuses to start.
#[test]
fn an_expression_that_does_not_compile_is_a_load_error() {
    let bad = "upstream: demo\ntools:\n  refund_like:\n    upstream_tool: counter\n    when:\n      \
               - {expr: 'true', message: ok}\n      - {expr: 'args.amount <=', message: m}\n";
    let dir = ConfigDir::new(&demo_stdio_config(&callers(), ""), &[("money.yaml", bad)]);
    let check = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args(["check", "--offline", "--config"])
        .arg(dir.config())
        .output()
        .expect("run check");
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("money.yaml")
            && stderr.contains("tools.refund_like.when.1.expr")
            && stderr.contains("not a valid CEL expression"),
        "{stderr}"
    );

    // `run` kills it and fails the test if it keeps serving.
    let serve = common::process::run(
        Command::new(env!("CARGO_BIN_EXE_narrowgate"))
            .args(["serve", "--config"])
            .arg(dir.config())
            .env("NARROWGATE_LISTEN", "127.0.0.1:0"),
        Duration::from_secs(30),
    );
    assert!(serve.code.is_some_and(|c| c != 0), "{}", serve.stderr);
    assert!(
        serve.stderr.contains("money.yaml") && serve.stderr.contains("when.1.expr"),
        "{}",
        serve.stderr
    );
}
