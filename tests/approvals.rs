//! Approvals against the real binary: `approval: user` answered through the Python SDK's
//! elicitation callback, and `approval: approver` decided through `narrowgate approvals` and the
//! HTTP API while the call waits, after its client went away, by denial, by timeout; the bounds
//! (nobody decides their own call, a decision is bound to its arguments, only approvers decide);
//! and what receipts and `check` say of it.

use crate::common;
#[path = "approvals/shared.rs"]
mod shared;
#[path = "approvals/spans.rs"]
mod spans;

use std::process::Command;
use std::time::Duration;

use common::peers::{CLIENT_DEADLINE, py_client_script, py2_python};
use common::process::run;
use common::{
    BOB, CAROL, Gateway, KEY, Raw, callers, demo_stdio_config, receipts_json, result_text,
    stateless_call_body, stateless_call_headers, wait_until_async,
};
use serde_json::{Value, json};

/// The refund tool in three ways: waiting for an approver (60s, and 1s), and asking the user.
const CONTRACTS: &str = r#"upstream: demo
tools:
  refund:
    upstream_tool: refund_order
    description: Refund an order once an approver agrees.
    side_effects: irreversible
    approval: approver
    approval_timeout: 60s
    redact: [/note]
    input:
      type: object
      properties:
        order_id: { type: string }
        amount: { type: number }
        note: { type: string }
      required: [order_id, amount]
      additionalProperties: false
  refund_quick:
    upstream_tool: refund_order
    side_effects: irreversible
    approval: approver
    approval_timeout: 1s
    input:
      type: object
      properties:
        order_id: { type: string }
        amount: { type: number }
      required: [order_id, amount]
      additionalProperties: false
  refund_user:
    upstream_tool: refund_order
    description: Refund an order once the user agrees.
    side_effects: irreversible
    approval: user
    redact: [/order_id]
    input:
      type: object
      properties:
        order_id: { type: string }
        amount: { type: number }
      required: [order_id, amount]
      additionalProperties: false
"#;

/// alice calls (and is an approver, so that deciding her own call can be tried); bob approves;
/// carol is neither.
fn start() -> Gateway {
    let callers = callers(&[("bob", BOB, "[]"), ("carol", CAROL, "['*']")]);
    let config = demo_stdio_config(&callers, "approvers: [alice, bob]\n");
    Gateway::start(&config, &[("demo.yaml", CONTRACTS)])
}

/// A stateless `tools/call` to the endpoint `url` as `key`, with `meta` added to its `_meta`;
/// the JSON-RPC result.
async fn call(url: &str, key: &str, tool: &str, arguments: Value, meta: Value) -> Value {
    let mut body = stateless_call_body(json!(1), tool, arguments);
    if let (Some(into), Some(extra)) = (
        body["params"]["_meta"].as_object_mut(),
        meta.as_object().cloned(),
    ) {
        into.extend(extra);
    }
    let headers = stateless_call_headers(key, tool);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let reply = Raw::new(url).post(&headers, &body.to_string()).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.message()["result"].clone()
}

/// [`call`] in a task of its own (no `_meta` added): the call that waits.
fn spawn_call(
    gw: &Gateway,
    tool: &'static str,
    arguments: Value,
) -> tokio::task::JoinHandle<Value> {
    let url = gw.url.clone();
    tokio::spawn(async move { call(&url, KEY, tool, arguments, json!({})).await })
}

/// `GET /approvals` as `key`: (status, body).
async fn list(gw: &Gateway, key: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .get(format!("{}/approvals", gw.base))
        .header("authorization", format!("Bearer {key}"))
        .send()
        .await
        .expect("GET /approvals");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `POST /approvals/{id}` as `key` (`None`: no credentials) with `body`: (status, body).
async fn decide(gw: &Gateway, key: Option<&str>, id: &str, body: Value) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/approvals/{id}", gw.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    let response = request.send().await.expect("POST /approvals/{id}");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Waits until bob sees a pending approval of `tool` whose order is `order`; returns its id.
async fn pending_id(gw: &Gateway, tool: &str, order: &str) -> String {
    wait_until_async(
        Duration::from_secs(20),
        common::POLL_EVERY,
        &format!("a pending approval of {tool} for {order}"),
        || gw.log(),
        async || {
            let (status, listed) = list(gw, BOB).await;
            listed
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| {
                    status == 200
                        && a["tool"] == tool
                        && a["arguments"]["order_id"] == order
                        && a["state"] == "pending"
                })
                .and_then(|a| a["id"].as_str().map(str::to_string))
                .ok_or_else(|| format!("{status} {listed}"))
        },
    )
    .await
}

/// `narrowgate approvals ARGS... --url BASE` with bob's key in `NARROWGATE_API_KEY`.
fn cli(gw: &Gateway, key: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .arg("approvals")
        .args(args)
        .args(["--url", &gw.base])
        .env("NARROWGATE_API_KEY", key)
        .output()
        .expect("run narrowgate approvals");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The newest receipt of `tool`.
fn last_receipt(gw: &Gateway, tool: &str) -> Value {
    receipts_json(&gw.config_path(), &["--tool", tool])
        .pop()
        .unwrap_or_else(|| panic!("no receipt of {tool}"))
}

/// Proves: an approver approves from the CLI (`approvals list`, then `approvals approve ID`)
/// while the call waits; the call is then forwarded and answered, the list showed the arguments
/// with `redact` paths masked, and the receipt records the approval's id, decision, approver,
/// the approver's reason and the wait.
#[tokio::test(flavor = "multi_thread")]
async fn an_approver_approves_from_the_cli_while_the_call_waits() {
    let gw = start();
    let args = json!({"order_id": "A-1", "amount": 20, "note": "card 4242"});
    let waiting = spawn_call(&gw, "refund", args.clone());
    let id = pending_id(&gw, "refund", "A-1").await;
    let (code, listed, err) = cli(&gw, BOB, &["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&listed).expect("list --json is JSON");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["caller"], "alice");
    assert_eq!(listed[0]["arguments"]["note"], "[redacted]", "{listed}");
    assert!(!waiting.is_finished(), "the call waits for its approver");

    let (code, out, err) = cli(&gw, BOB, &["approve", &id, "--reason", "ticket 7"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("approved") && out.contains(&id), "{out}");
    let result = waiting.await.expect("the call's task");
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structuredContent"]["refunded"], true, "{result}");

    let receipt = last_receipt(&gw, "refund");
    assert_eq!(receipt["outcome"], "ok");
    assert_eq!(receipt["approval_id"], id.as_str());
    assert_eq!(receipt["approval_decision"], "approved");
    assert_eq!(receipt["approver"], "bob");
    assert_eq!(
        receipt["reason"],
        format!("approval {id} was approved by bob: ticket 7")
    );
    assert!(
        receipt["approval_wait_ms"].as_f64().unwrap_or(0.0) > 0.0,
        "{receipt}"
    );
    // The approval was used: nothing is left to approve.
    assert_eq!(list(&gw, BOB).await, (200, json!([])));
    let (code, table, err) = common::receipts_command(&gw.config_path(), &["--tool", "refund"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("approved by bob after") && table.contains(&id),
        "{table}"
    );
}

/// Waits for `gw`'s receipt of a `refund` call whose client went away while it waited for an
/// approver (decision `abandoned`); the receipt.
async fn abandoned_receipt(gw: &Gateway) -> Value {
    wait_until_async(
        Duration::from_secs(20),
        common::POLL_EVERY,
        "the abandoned call's receipt",
        || gw.log(),
        async || {
            let receipts = receipts_json(&gw.config_path(), &["--tool", "refund"]);
            receipts
                .iter()
                .find(|r| r["approval_decision"] == "abandoned")
                .cloned()
                .ok_or_else(|| format!("{receipts:?}"))
        },
    )
    .await
}

/// Proves: a call whose client went away stays pending; the approver approves it then, and the
/// same call sent again collects the approval at once and is performed, once: the approval is
/// used, so a third identical call waits anew.
#[tokio::test(flavor = "multi_thread")]
async fn approving_after_the_client_went_away_lets_the_same_call_collect_it() {
    let gw = start();
    let args = json!({"order_id": "B-2", "amount": 30});
    let first = spawn_call(&gw, "refund", args.clone());
    let id = pending_id(&gw, "refund", "B-2").await;
    // The client goes away: its request (and connection) is dropped.
    first.abort();
    let _ = first.await;
    abandoned_receipt(&gw).await;
    let (status, decided) = decide(&gw, Some(BOB), &id, json!({"decision": "approve"})).await;
    assert_eq!(status, 200, "{decided}");

    let again = call(&gw.url, KEY, "refund", args.clone(), json!({})).await;
    assert_eq!(again["isError"], false, "{again}");
    let receipt = last_receipt(&gw, "refund");
    assert_eq!(receipt["approval_id"], id.as_str());
    assert_eq!(receipt["approval_decision"], "approved");
    assert_eq!(receipt["attempts"], 1);

    // Used once: the same call again is a new pending approval, which bob denies.
    let third = spawn_call(&gw, "refund", args);
    let new_id = pending_id(&gw, "refund", "B-2").await;
    assert_ne!(new_id, id);
    let (status, _) = decide(&gw, Some(BOB), &new_id, json!({"decision": "deny"})).await;
    assert_eq!(status, 200);
    assert_eq!(third.await.expect("third call")["isError"], true);
}

/// Proves: a denial answers the waiting call with a tool error carrying the reason, nothing
/// reaches the upstream, and the receipt says denied, by whom and why (also in the table of
/// `narrowgate receipts --outcome denied`).
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_call_is_a_tool_error_with_the_reason() {
    let gw = start();
    let waiting = spawn_call(&gw, "refund", json!({"order_id": "C-3", "amount": 4000}));
    let id = pending_id(&gw, "refund", "C-3").await;
    let (code, _, err) = cli(&gw, BOB, &["deny", &id, "--reason", "amount too high"]);
    assert_eq!(code, 0, "{err}");
    let result = waiting.await.expect("the call's task");
    assert_eq!(result["isError"], true, "{result}");
    let text = result_text(&result);
    assert!(text.contains("denied by bob: amount too high"), "{text}");
    let receipt = last_receipt(&gw, "refund");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["attempts"], 0);
    assert_eq!(receipt["approval_decision"], "denied");
    assert_eq!(receipt["approver"], "bob");
    // `narrowgate receipts --outcome denied` says why: the decision and the approver's reason.
    let (code, table, err) = common::receipts_command(&gw.config_path(), &["--outcome", "denied"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        table.contains("denied by bob after")
            && table.contains(&format!("approval {id} was denied by bob: amount too high")),
        "{table}"
    );
    // Decided: a second decision is refused.
    let (status, _) = decide(&gw, Some(BOB), &id, json!({"decision": "approve"})).await;
    assert_eq!(status, 404, "a used denial is gone");
}

/// Proves: a call nobody decides within `approval_timeout` is refused (outcome denied,
/// decision timeout) and never forwarded.
#[tokio::test(flavor = "multi_thread")]
async fn an_undecided_call_times_out() {
    let gw = start();
    let result = call(
        &gw.url,
        KEY,
        "refund_quick",
        json!({"order_id": "D-4", "amount": 1}),
        json!({}),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(result_text(&result).contains("timed out"), "{result}");
    let receipt = last_receipt(&gw, "refund_quick");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["attempts"], 0);
    assert_eq!(receipt["approval_decision"], "timeout");
    assert!(
        receipt["approval_wait_ms"].as_f64().unwrap_or(0.0) >= 1000.0,
        "{receipt}"
    );
}

/// Proves: an approver may not decide their own call (403), another approver may; a caller that
/// is no approver gets 403 on both endpoints, no credentials 401, an unknown id 404.
#[tokio::test(flavor = "multi_thread")]
async fn only_other_approvers_decide() {
    let gw = start();
    let waiting = spawn_call(&gw, "refund", json!({"order_id": "E-5", "amount": 5}));
    let id = pending_id(&gw, "refund", "E-5").await;
    let approve = json!({"decision": "approve"});
    let (status, body) = decide(&gw, Some(KEY), &id, approve.clone()).await;
    assert_eq!(status, 403, "alice approving her own call: {body}");
    assert_eq!(list(&gw, CAROL).await.0, 403, "carol is no approver");
    assert_eq!(decide(&gw, Some(CAROL), &id, approve.clone()).await.0, 403);
    assert_eq!(decide(&gw, None, &id, approve.clone()).await.0, 401);
    let (code, _, err) = cli(&gw, CAROL, &["approve", &id]);
    assert_eq!(code, 1, "the CLI fails for carol");
    assert!(err.contains("403"), "{err}");
    assert_eq!(
        decide(&gw, Some(BOB), "no-such-id", approve.clone())
            .await
            .0,
        404
    );
    assert!(!waiting.is_finished(), "none of that decided the call");
    assert_eq!(decide(&gw, Some(BOB), &id, approve).await.0, 200);
    assert_eq!(waiting.await.expect("call")["isError"], false);
}

/// Proves: an approval is bound to its arguments: naming an approved id for other arguments is
/// refused without reaching the upstream, and does not use the approval, which the call with the
/// approved arguments then collects.
#[tokio::test(flavor = "multi_thread")]
async fn a_decision_is_bound_to_its_arguments() {
    let gw = start();
    let first = spawn_call(&gw, "refund", json!({"order_id": "F-6", "amount": 10}));
    let id = pending_id(&gw, "refund", "F-6").await;
    first.abort();
    let _ = first.await;
    let (status, _) = decide(&gw, Some(BOB), &id, json!({"decision": "approve"})).await;
    assert_eq!(status, 200);

    let named = json!({"narrowgate/approvalId": id});
    let other = call(
        &gw.url,
        KEY,
        "refund",
        json!({"order_id": "F-6", "amount": 9999}),
        named.clone(),
    )
    .await;
    assert_eq!(other["isError"], true, "{other}");
    assert!(result_text(&other).contains("another call"), "{other}");
    let receipt = last_receipt(&gw, "refund");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["attempts"], 0);
    assert_eq!(receipt["approval_decision"], "refused");

    let same = call(
        &gw.url,
        KEY,
        "refund",
        json!({"order_id": "F-6", "amount": 10}),
        named,
    )
    .await;
    assert_eq!(same["isError"], false, "{same}");
    assert_eq!(same["structuredContent"]["amount"], 10);
}

/// Runs the Python SDK approval client: it calls `tool` and answers the elicitation with `answer`
/// (in a 2025-11-25 session).
fn python_call(gw: &Gateway, answer: &str, tool: &str, arguments: Value) -> Value {
    python_call_in(gw, answer, tool, arguments, "legacy")
}

/// The same in the SDK's handshake `mode` (`auto`: 2026-07-28, the question through MRTR).
fn python_call_in(gw: &Gateway, answer: &str, tool: &str, arguments: Value, mode: &str) -> Value {
    let ran = run(
        Command::new(py2_python())
            .arg(py_client_script("py2_approval_client.py"))
            .args([&gw.url, KEY, answer, tool, &arguments.to_string(), mode]),
        CLIENT_DEADLINE,
    );
    assert_eq!(ran.code, Some(0), "client failed: {}", ran.stderr);
    ran.json()
}

/// Proves: `approval: user` asks the calling client's user through elicitation (Python SDK
/// callback), showing the tool, its description and the arguments with `redact` paths masked;
/// accept forwards the call, decline refuses it (outcome denied), and a client that declared no
/// elicitation is refused without being asked.
#[tokio::test(flavor = "multi_thread")]
async fn the_user_accepts_or_declines_through_elicitation() {
    let gw = start();
    let arguments = json!({"order_id": "SECRET-77", "amount": 12.5});

    let accepted = python_call(&gw, "accept", "refund_user", arguments.clone());
    assert_eq!(accepted["is_error"], false, "{accepted}");
    assert_eq!(
        accepted["structured_content"]["refunded"], true,
        "{accepted}"
    );
    let asked = &accepted["elicitations"][0];
    let message = asked["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("refund_user")
            && message.contains("Refund an order once the user agrees.")
            && message.contains("12.5")
            && message.contains("[redacted]")
            && !message.contains("SECRET-77"),
        "{message}"
    );
    assert_eq!(
        asked["requested_schema"]["properties"]["approve"]["type"],
        "boolean"
    );
    let receipt = last_receipt(&gw, "refund_user");
    assert_eq!(receipt["outcome"], "ok");
    assert_eq!(receipt["approval_decision"], "accepted");
    assert_eq!(receipt["approver"], "user");

    let declined = python_call(&gw, "decline", "refund_user", arguments.clone());
    assert_eq!(declined["is_error"], true, "{declined}");
    assert_eq!(declined["elicitations"].as_array().map(Vec::len), Some(1));
    let receipt = last_receipt(&gw, "refund_user");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["attempts"], 0);
    assert_eq!(receipt["approval_decision"], "declined");

    let unable = python_call(&gw, "none", "refund_user", arguments);
    assert_eq!(unable["is_error"], true, "{unable}");
    assert_eq!(unable["elicitations"], json!([]));
    assert_eq!(
        last_receipt(&gw, "refund_user")["approval_decision"],
        "unsupported"
    );
}

/// Proves: a 2026-07-28 stateless call of an `approval: user` tool from a client that declared no
/// elicitation is refused (fail closed), never forwarded, and its receipt says so.
#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_call_cannot_ask_the_user_and_is_refused() {
    let gw = start();
    let result = call(
        &gw.url,
        KEY,
        "refund_user",
        json!({"order_id": "G-7", "amount": 1}),
        json!({}),
    )
    .await;
    assert_eq!(result["isError"], true, "{result}");
    let receipt = last_receipt(&gw, "refund_user");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["attempts"], 0);
}

/// Proves: on 2026-07-28 (the Python SDK's default `auto` mode, no session) the user's approval
/// travels as MRTR: the gateway answers with an `InputRequiredResult` carrying the question (the
/// tool, its description, the arguments with `redact` paths masked), the SDK asks the user through
/// its elicitation callback and sends the call again with the answer; accept forwards the call
/// (one receipt, decision `accepted`), decline refuses it (decision `declined`).
#[tokio::test(flavor = "multi_thread")]
async fn the_user_approves_through_mrtr_on_2026_07_28() {
    let gw = start();
    let arguments = json!({"order_id": "SECRET-77", "amount": 12.5});
    let accepted = python_call_in(&gw, "accept", "refund_user", arguments.clone(), "auto");
    assert_eq!(accepted["protocol_version"], "2026-07-28", "{accepted}");
    assert_eq!(accepted["is_error"], false, "{accepted}");
    assert_eq!(
        accepted["structured_content"]["refunded"], true,
        "{accepted}"
    );
    let asked = accepted["elicitations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(asked.len(), 1, "asked once: {accepted}");
    let message = asked[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("refund_user") && message.contains("12.5"),
        "{message}"
    );
    assert!(!message.contains("SECRET-77"), "redacted: {message}");
    let receipts = receipts_json(&gw.config_path(), &["--tool", "refund_user"]);
    assert_eq!(
        receipts.len(),
        1,
        "the asking round writes no receipt: {receipts:?}"
    );
    assert_eq!(receipts[0]["approval_decision"], "accepted", "{receipts:?}");
    assert_eq!(receipts[0]["outcome"], "ok");

    let declined = python_call_in(&gw, "decline", "refund_user", arguments, "auto");
    assert_eq!(declined["is_error"], true, "{declined}");
    assert_eq!(declined["elicitations"].as_array().map(Vec::len), Some(1));
    let receipt = last_receipt(&gw, "refund_user");
    assert_eq!(receipt["approval_decision"], "declined", "{receipt}");
    assert_eq!(receipt["outcome"], "denied");
    assert_eq!(receipt["attempts"], 0);
}

/// A stateless call from a client that declares elicitation, with `extra` merged into `params`
/// (`inputResponses`, `requestState`): the JSON-RPC result.
async fn mrtr_call(gw: &Gateway, arguments: Value, extra: Value) -> Value {
    let mut body = stateless_call_body(json!(1), "refund_user", arguments);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    if let (Some(params), Some(extra)) = (body["params"].as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    let headers = stateless_call_headers(KEY, "refund_user");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let reply = Raw::new(&gw.url).post(&headers, &body.to_string()).await;
    assert_eq!(reply.status, 200, "{reply:?}");
    reply.message()["result"].clone()
}

/// Proves: the `requestState` of an MRTR question is the gateway's own and good for one answer to
/// that very call: an answer with it is used once (a replay is refused), an answer with a made-up
/// state, or with a state asked for other arguments, is refused; none of these reaches the
/// upstream.
#[tokio::test(flavor = "multi_thread")]
async fn an_mrtr_answer_counts_once_and_only_for_its_own_question() {
    let gw = start();
    let arguments = json!({"order_id": "M-1", "amount": 3});
    let ask = || async { mrtr_call(&gw, arguments.clone(), json!({})).await };
    let accept = json!({"narrowgate/approval": {"action": "accept", "content": {"approve": true}}});

    let first = ask().await;
    assert_eq!(first["resultType"], "input_required", "{first}");
    let state = first["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    let question = &first["inputRequests"]["narrowgate/approval"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    let answered = mrtr_call(
        &gw,
        arguments.clone(),
        json!({"inputResponses": accept, "requestState": state}),
    )
    .await;
    assert_eq!(answered["isError"], false, "{answered}");
    let replayed = mrtr_call(
        &gw,
        arguments.clone(),
        json!({"inputResponses": accept, "requestState": state}),
    )
    .await;
    assert_eq!(replayed["isError"], true, "used once: {replayed}");

    let made_up = mrtr_call(
        &gw,
        arguments.clone(),
        json!({"inputResponses": accept, "requestState": "0b7e2d4a-0000-4000-8000-000000000000"}),
    )
    .await;
    assert_eq!(made_up["isError"], true, "{made_up}");

    let other = ask().await;
    let other_state = other["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    let for_other_arguments = mrtr_call(
        &gw,
        json!({"order_id": "M-1", "amount": 300}),
        json!({"inputResponses": accept, "requestState": other_state}),
    )
    .await;
    assert_eq!(
        for_other_arguments["isError"], true,
        "{for_other_arguments}"
    );
    let performed: Vec<Value> = receipts_json(&gw.config_path(), &["--tool", "refund_user"])
        .into_iter()
        .filter(|r| r["attempts"] != 0)
        .collect();
    assert_eq!(
        performed.len(),
        1,
        "only the first answer reached the upstream: {performed:?}"
    );
}

/// Proves: `check` warns of an irreversible tool without approval, and of approver tools when
/// nobody is an approver; `narrowgate receipts` shows the approval in its table.
#[test]
fn check_warns_of_irreversible_tools_nobody_approves() {
    let contracts = r#"upstream: demo
tools:
  refund_now:
    upstream_tool: refund_order
    side_effects: irreversible
  refund_later:
    upstream_tool: refund_order
    side_effects: irreversible
    approval: approver
"#;
    let dir = common::ConfigDir::new(
        &demo_stdio_config(&callers(&[]), ""),
        &[("demo.yaml", contracts)],
    );
    let ran = run(
        Command::new(env!("CARGO_BIN_EXE_narrowgate"))
            .args(["check", "--offline", "--json", "--config"])
            .arg(dir.config()),
        Duration::from_secs(30),
    );
    let report = ran.json();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("`refund_now`") && warnings.contains("approval: none"),
        "{report:#}"
    );
    assert!(
        warnings.contains("`refund_later`") && warnings.contains("no `approvers`"),
        "{report:#}"
    );
    assert_eq!(ran.code, Some(0), "warnings are not problems: {report:#}");
}

/// Proves: the repository's example (`contracts/demo.yaml`'s `refund_order`) works as its docs
/// say: a refund over 500 by a caller without the `finance` role is refused by its precondition
/// at once, before anyone is asked (nothing is listed); the same refund by a `finance` caller is
/// held for an approver, and approved, forwarded.
#[tokio::test(flavor = "multi_thread")]
async fn the_example_refund_asks_its_precondition_first_then_an_approver() {
    let example = std::fs::read_to_string(common::peers::repo_root().join("contracts/demo.yaml"))
        .expect("contracts/demo.yaml");
    let callers = format!(
        "{}  - name: fin\n    api_key_sha256: {}\n    tools: ['*']\n    roles: [finance]\n",
        callers(&[("bob", BOB, "[]")]),
        common::hash_key(CAROL)
    );
    let gw = Gateway::start(
        &demo_stdio_config(&callers, "approvers: [bob]\n"),
        &[("demo.yaml", example.as_str())],
    );
    let large = json!({"order_id": "X-1", "amount": 900});
    // Bounded: were the approval asked first, this call would wait for an approver.
    let refused = tokio::time::timeout(
        Duration::from_secs(20),
        call(&gw.url, KEY, "refund_order", large.clone(), json!({})),
    )
    .await
    .expect("the precondition answers at once, before any approval is asked");
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        result_text(&refused),
        "refunds over 500 need the finance role"
    );
    assert_eq!(list(&gw, BOB).await, (200, json!([])), "nobody was asked");
    let receipt = last_receipt(&gw, "refund_order");
    assert_eq!(receipt["approval_decision"], Value::Null, "{receipt}");

    let url = gw.url.clone();
    let waiting =
        tokio::spawn(async move { call(&url, CAROL, "refund_order", large, json!({})).await });
    let id = pending_id(&gw, "refund_order", "X-1").await;
    let (status, _) = decide(&gw, Some(BOB), &id, json!({"decision": "approve"})).await;
    assert_eq!(status, 200);
    let result = waiting.await.expect("the call's task");
    assert_eq!(result["structuredContent"]["refunded"], true, "{result}");
    assert_eq!(last_receipt(&gw, "refund_order")["caller"], "fin");
}
