//! The upstream's requests to the client (`sampling/createMessage`, `elicitation/create`,
//! `roots/list`) through the gateway, answered by the official Python SDK's callbacks
//! (`tests/clients/py2_asks_client.py`), over every kind of upstream connection: the forwarder
//! to an HTTP upstream spoken to in 2026-07-28, which asks with an `InputRequiredResult` (MRTR)
//! and gets the call again with the answers; the forwarder to one on a 2025-11-25 session
//! (`--legacy`), which sends the request on the call's own answer stream; and rmcp's client, for
//! which the request is the only call in flight's (stdio).

use serde_json::{Value, json};

use crate::common::peers::{CLIENT_DEADLINE, py_client_script, py2_python};
use crate::common::process::run;
use crate::common::raw::{result_text, stateless_call_body, stateless_call_headers};
use crate::common::{Gateway, KEY, Raw, callers, receipts_json, upstream::HttpUpstream};
use crate::relays::over::{Over, Upstreams};

/// A second caller's key.
pub(super) const BOB_KEY: &str = "test-key-bob";

pub(super) const CONTRACT: &str = "upstream: demo
tools:
  test_sampling:
    input: { type: object, properties: { prompt: { type: string } }, required: [prompt] }
  test_elicitation:
    input: { type: object, properties: { message: { type: string } }, required: [message] }
  list_roots:
    input: { type: object, additionalProperties: false }
  sampling_refused:
    upstream_tool: test_sampling
    relay: { sampling: false }
    input: { type: object, properties: { prompt: { type: string } }, required: [prompt] }
";

/// The gateway in front of the demo upstream reached `over` this way.
fn gateway(over: Over<'_>) -> Gateway {
    let config = over.config(&callers(&[("bob", BOB_KEY, "['*']")]));
    let gateway = Gateway::start(&config, &[("demo.yaml", CONTRACT)]);
    gateway.wait_tools_joined("demo", &["test_sampling", "list_roots"]);
    over.assert_spoken(&gateway);
    gateway
}

/// Runs the Python client with `capabilities` (`all` or `none`) and `calls` in a 2025-11-25
/// session; what it printed.
fn client(gateway: &Gateway, capabilities: &str, calls: Value) -> Value {
    client_in(gateway, capabilities, calls, "legacy")
}

/// The same in the SDK's `mode` (`legacy`: a session; `auto`: stateless 2026-07-28 here).
fn client_in(gateway: &Gateway, capabilities: &str, calls: Value, mode: &str) -> Value {
    let ran = run(
        std::process::Command::new(py2_python())
            .arg(py_client_script("py2_asks_client.py"))
            .args([&gateway.url, KEY, capabilities, &calls.to_string(), mode])
            .env("PY_CLIENT_TIMEOUT", "20"),
        CLIENT_DEADLINE,
    );
    assert_eq!(ran.code, Some(0), "client failed: {}", ran.stderr);
    ran.json()
}

/// The result of the `n`th call: whether it is a tool error, and its text.
fn result(out: &Value, n: usize) -> (bool, String) {
    let r = &out["results"][n];
    (
        r["is_error"].as_bool().unwrap_or(true),
        r["text"].as_str().unwrap_or_default().to_string(),
    )
}

/// Proves: each of the upstream's three requests reaches the client whose call caused it, its
/// callback runs exactly once, and its answer goes back upstream (the tools return what the
/// callbacks answered); over HTTP and stdio. Fails without the relay (the gateway answered
/// these requests with -32601 itself, and the tools returned errors).
#[tokio::test]
async fn a_clients_callbacks_answer_the_upstreams_requests_once_each() {
    let upstreams = Upstreams::start();
    for way in upstreams.every() {
        let gateway = gateway(way);
        let over = way.name();
        let out = client(&gateway, "all", three_asking_calls());
        assert_each_answered_once(&out, over);
        assert_eq!(out["sampling_prompts"], json!(["say hi"]), "{over}: {out}");
        assert_eq!(
            out["elicitation_messages"],
            json!(["who are you?"]),
            "{over}: {out}"
        );
    }
}

/// A call of each of the tools that ask the client something.
fn three_asking_calls() -> Value {
    json!([["test_sampling", {"prompt": "say hi"}],
           ["test_elicitation", {"message": "who are you?"}],
           ["list_roots", {}]])
}

/// Each callback of the client ran once for [`three_asking_calls`], and each tool returned
/// what it answered.
fn assert_each_answered_once(out: &Value, over: &str) {
    assert_eq!(
        out["called"],
        json!({"sampling": 1, "elicitation": 1, "roots": 1}),
        "{over}: {out}"
    );
    let (error, text) = result(out, 0);
    assert!(!error && text.contains("a sampled answer"), "{over}: {out}");
    let (error, text) = result(out, 1);
    assert!(!error && text.contains("ada@example.com"), "{over}: {out}");
    let (error, text) = result(out, 2);
    assert!(
        !error && text.contains("file:///work/project"),
        "{over}: {out}"
    );
}

/// Proves: the upstream gets a JSON-RPC error, never an answer, when the client declared no
/// such capability, when the tool's contract refuses the relay (`relay: {sampling: false}`: the
/// client's callback is not called), and when the user's accepted elicitation is outside the
/// request's `requestedSchema` (the callback ran, its answer did not go upstream); over HTTP
/// and stdio.
#[tokio::test]
async fn requests_the_client_cannot_or_may_not_answer_are_errors_upstream() {
    let upstreams = Upstreams::start();
    for way in upstreams.every() {
        let gateway = gateway(way);
        let over = way.name();
        let none = client(&gateway, "none", three_asking_calls());
        for n in 0..3 {
            let (error, text) = result(&none, n);
            assert!(error && text.contains("not relayed"), "{over}: {none}");
        }
        let all = client(
            &gateway,
            "all",
            json!([["sampling_refused", {"prompt": "say hi"}],
                   ["test_elicitation", {"message": "answer outside the schema"}]]),
        );
        assert_eq!(
            all["called"],
            json!({"sampling": 0, "elicitation": 1, "roots": 0}),
            "{over}: {all}"
        );
        let (error, text) = result(&all, 0);
        assert!(
            error && text.contains("the contract of tool `sampling_refused` does not relay it"),
            "{over}: {all}"
        );
        let (error, text) = result(&all, 1);
        assert!(
            error && text.contains("outside the requestedSchema") && !text.contains("username"),
            "{over}: {all}"
        );
    }
}

/// Proves: a stateless (2026-07-28) client is asked through MRTR: its call is answered with an
/// `InputRequiredResult` carrying the upstream's request, the Python SDK (`auto` mode) answers
/// it through its callbacks and sends the call again, and the parked upstream call goes on with
/// the answer. Each callback runs exactly once, each tool returns what it answered, and each
/// call leaves one receipt; over HTTP and stdio. Fails without the parking (the upstream got
/// "not relayed" and the tools returned errors).
#[tokio::test]
async fn a_stateless_clients_callbacks_answer_through_mrtr_once_each() {
    let upstreams = Upstreams::start();
    for way in upstreams.every() {
        let gateway = gateway(way);
        let over = way.name();
        let out = client_in(&gateway, "all", three_asking_calls(), "auto");
        assert_each_answered_once(&out, over);
        for tool in ["test_sampling", "test_elicitation", "list_roots"] {
            let receipts = receipts_json(&gateway.config_path(), &["--tool", tool]);
            assert_eq!(
                receipts.len(),
                1,
                "{over}: one receipt per call: {receipts:?}"
            );
            assert_eq!(receipts[0]["outcome"], "ok", "{over}: {receipts:?}");
        }
    }
}

/// A stateless `tools/call` of `tool` with `arguments` as the caller with `key`, its client
/// declaring elicitation, with `extra` merged into `params`: the JSON-RPC reply's message.
pub(super) async fn stateless(
    gateway: &Gateway,
    key: &str,
    tool: &str,
    arguments: Value,
    extra: Value,
) -> Value {
    let mut body = stateless_call_body(json!(1), tool, arguments);
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}});
    if let (Some(params), Some(extra)) = (body["params"].as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    let headers = stateless_call_headers(key, tool);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Raw::new(&gateway.url)
        .post(&headers, &body.to_string())
        .await
        .message()
}

/// Proves: the `requestState` of a parked call is the gateway's own, good once, only for the
/// call it was asked for and only for its caller: another caller's answer with it, an answer
/// for other arguments, a made-up state and a replay are refused with -32602, and none of them
/// costs the owner its call (the owner's answer afterwards completes it); an answer outside the
/// `requestedSchema` is an error upstream. Each call leaves one receipt, and a made-up state
/// never runs a new call.
#[tokio::test]
async fn a_parked_calls_state_is_good_once_and_only_for_its_own_call() {
    let upstream = HttpUpstream::start(&[]);
    let gateway = gateway(Over::Http(&upstream, "http, 2026-07-28 stateless"));
    let elicit =
        |key, arguments, extra| stateless(&gateway, key, "test_elicitation", arguments, extra);
    let who = json!({"message": "who are you?"});
    let asked = elicit(KEY, who.clone(), json!({})).await;
    let asked = &asked["result"];
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = &asked["inputRequests"]["upstream-1"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["message"], "who are you?", "{asked}");
    let state = asked["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    let answer = |state: &str| {
        json!({"requestState": state, "inputResponses": {"upstream-1": {
            "action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}}})
    };
    let refused = |reply: &Value| {
        reply["error"]["code"] == json!(-32602)
            && reply["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("requestState names no call"))
    };
    let by_bob = elicit(BOB_KEY, who.clone(), answer(&state)).await;
    assert!(refused(&by_bob), "another caller: {by_bob}");
    let other_arguments = json!({"message": "someone else?"});
    let other = elicit(KEY, other_arguments, answer(&state)).await;
    assert!(refused(&other), "other arguments: {other}");
    let made_up = answer("0b7e2d4a-0000-4000-8000-000000000000");
    let made_up = elicit(KEY, who.clone(), made_up).await;
    assert!(refused(&made_up), "a made-up state: {made_up}");

    let answered = elicit(KEY, who.clone(), answer(&state)).await;
    let result = &answered["result"];
    assert_eq!(result["isError"], false, "{answered}");
    assert!(
        result_text(result).contains("ada@example.com"),
        "{answered}"
    );
    let replayed = elicit(KEY, who.clone(), answer(&state)).await;
    assert!(refused(&replayed), "a replay: {replayed}");

    let outside = json!({"message": "answer outside the schema"});
    let asked = elicit(KEY, outside.clone(), json!({})).await;
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    let bad = json!({"requestState": state, "inputResponses": {"upstream-1": {
        "action": "accept", "content": {"username": 5}}}});
    let bad = elicit(KEY, outside, bad).await;
    assert_eq!(bad["result"]["isError"], true, "{bad}");
    assert!(
        result_text(&bad["result"]).contains("outside the requestedSchema"),
        "{bad}"
    );
    let receipts = receipts_json(&gateway.config_path(), &["--tool", "test_elicitation"]);
    assert_eq!(
        receipts.len(),
        2,
        "one receipt per call, none for the refusals: {receipts:?}"
    );
}

/// Proves: a stateless client that declared none of the capabilities is never asked: the
/// upstream gets an error and the call a tool error, on the direct path and on rmcp's (a call
/// that asks for progress); over HTTP and stdio.
#[tokio::test]
async fn a_stateless_client_without_the_capability_is_never_asked() {
    let upstreams = Upstreams::start();
    for way in upstreams.every() {
        let gateway = gateway(way);
        let over = way.name();
        let raw = Raw::new(&gateway.url);
        let headers = stateless_call_headers(KEY, "test_sampling");
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        for progress in [false, true] {
            let mut body = stateless_call_body(json!(1), "test_sampling", json!({"prompt": "hi"}));
            if progress {
                body["params"]["_meta"]["progressToken"] = json!("p-1");
            }
            let reply = raw.post(&headers, &body.to_string()).await;
            let result = &reply.message()["result"];
            assert_eq!(
                result["isError"],
                json!(true),
                "{over}, progress {progress}: {reply:?}"
            );
            let text = result_text(result);
            assert!(
                text.contains("not relayed"),
                "{over}, progress {progress}: {text}"
            );
        }
    }
}

/// Proves: the same with the official TypeScript SDK (`@modelcontextprotocol/sdk` 1.32.2,
/// `tests/clients/ts_client.mjs`) as the client, over HTTP and stdio: its sampling, elicitation
/// and roots handlers each run exactly once, with the upstream's own request, and what they
/// answer is what the tools return.
#[tokio::test]
async fn a_typescript_clients_handlers_answer_the_upstreams_requests_once_each() {
    let upstreams = Upstreams::start();
    for way in upstreams.every() {
        let gateway = gateway(way);
        let options = json!({
            "capabilities": {
                "sampling": "a sampled answer from TypeScript",
                "elicitation": {"action": "accept",
                                "content": {"username": "grace", "email": "grace@example.com"}},
                "roots": [{"uri": "file:///work/ts-project", "name": "ts-project"}]
            },
            "steps": [
                {"op": "call", "name": "test_sampling", "arguments": {"prompt": "say hi"}},
                {"op": "call", "name": "test_elicitation", "arguments": {"message": "who are you?"}},
                {"op": "call", "name": "list_roots", "arguments": {}}
            ]
        });
        let out = crate::common::peers::ts_client(&gateway.url, KEY, &options);
        let over = way.name();
        assert_eq!(
            out["asked"],
            json!({"sampling": 1, "elicitation": 1, "roots": 1}),
            "{over}: {out}"
        );
        assert!(
            out["requests"]["sampling"].to_string().contains("say hi"),
            "{over}: {out}"
        );
        assert!(
            out["requests"]["elicitation"]
                .to_string()
                .contains("who are you?"),
            "{over}: {out}"
        );
        let text = |n: usize| out["results"][n]["content"].to_string();
        for n in 0..3 {
            assert_eq!(out["results"][n]["is_error"], false, "{over}: {out}");
        }
        assert!(
            text(0).contains("a sampled answer from TypeScript"),
            "{over}: {out}"
        );
        assert!(text(1).contains("grace@example.com"), "{over}: {out}");
        assert!(text(2).contains("file:///work/ts-project"), "{over}: {out}");
    }
}
