//! `narrowgate stdio` launched by real stdio clients, as a desktop client launches it: the
//! official Python SDK 2.x and 1.x, the TypeScript SDK and the Inspector CLI each start the
//! gateway as their server (the caller's key in the child's environment, `NARROWGATE_API_KEY`)
//! and list its tools, call one, are refused an argument outside the contract, and, where the
//! client can answer, approve an `approval: user` call through elicitation and answer a sampling
//! request the upstream sends during a call. Each SDK's own validation reads every answer.

use std::process::Command;

use serde_json::{Value, json};

use crate::common::peers::{
    CLIENT_DEADLINE, PyClient, node_bin, py_client_script, py2_python, ts_client,
};
use crate::common::process::run;
use crate::common::{ConfigDir, KEY, callers, demo_stdio_config, narrowgate_bin, receipts_json};

const CONTRACT: &str = "upstream: demo
tools:
  echo:
    description: Echo a short message.
    privilege: read
    input:
      type: object
      properties: { message: { type: string, maxLength: 20 } }
      required: [message]
      additionalProperties: false
  echo_approved:
    upstream_tool: echo
    description: Echo a short message once the user approves.
    privilege: write
    side_effects: irreversible
    approval: user
    input:
      type: object
      properties: { message: { type: string, maxLength: 20 } }
      required: [message]
      additionalProperties: false
  test_sampling:
    description: Ask the client's model a question.
    privilege: read
    input:
      type: object
      properties: { prompt: { type: string, maxLength: 100 } }
      required: [prompt]
      additionalProperties: false
";

/// A configuration folder for a stdio gateway in front of the demo upstream (itself a stdio
/// child of the gateway).
fn setup() -> ConfigDir {
    ConfigDir::new(
        &demo_stdio_config(&callers(&[]), ""),
        &[("demo.yaml", CONTRACT)],
    )
}

/// The `stdio:` target the client drivers launch: `narrowgate stdio --config FILE`, the key in
/// its environment as a desktop client's entry sets it.
fn target(dir: &ConfigDir) -> String {
    let spec = json!({
        "command": narrowgate_bin().display().to_string(),
        "args": ["stdio", "--config", dir.config().display().to_string()],
        "env": {"NARROWGATE_API_KEY": KEY},
    });
    format!("stdio:{spec}")
}

/// The calls every client makes: one that works, one outside the contract, one the user must
/// approve, one during which the upstream asks the client's model.
fn calls() -> Value {
    json!([
        ["echo", {"message": "hi"}],
        ["echo", {"message": "a message far longer than twenty characters"}],
        ["echo_approved", {"message": "approved"}],
        ["test_sampling", {"prompt": "say hi"}],
    ])
}

fn tool_names(listed: &Value) -> Vec<String> {
    let mut names: Vec<String> = listed["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

const TOOLS: [&str; 3] = ["echo", "echo_approved", "test_sampling"];

/// Asserts each of `results` ([is_error, text] per call of [`calls`]) is what the gateway
/// answers a client that approves and samples.
fn assert_answered(client: &str, results: &[(bool, String)]) {
    assert_eq!(results.len(), 4, "{client}: {results:?}");
    assert_eq!(results[0], (false, "Echo: hi".into()), "{client}");
    assert!(
        results[1].0 && results[1].1.contains("arguments rejected by the contract"),
        "{client}: the long message was not refused: {:?}",
        results[1]
    );
    assert!(
        !results[1].1.contains("far longer"),
        "{client}: the refusal quotes the argument"
    );
    assert_eq!(results[2], (false, "Echo: approved".into()), "{client}");
    assert!(
        !results[3].0 && results[3].1.contains("LLM response:"),
        "{client}: sampling was not relayed: {:?}",
        results[3]
    );
}

/// Asserts the receipts of one client's calls: the refused one never reached the upstream.
fn assert_receipts(client: &str, dir: &ConfigDir) {
    let receipts = receipts_json(&dir.config(), &["--caller", "alice"]);
    let outcomes: Vec<(&str, &str)> = receipts
        .iter()
        .map(|r| {
            (
                r["tool"].as_str().unwrap_or_default(),
                r["outcome"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    for expected in [
        ("echo", "ok"),
        ("echo", "rejected_input"),
        ("echo_approved", "ok"),
        ("test_sampling", "ok"),
    ] {
        assert!(
            outcomes.contains(&expected),
            "{client}: {expected:?} not in {outcomes:?}"
        );
    }
    let refused = receipts
        .iter()
        .find(|r| r["outcome"] == "rejected_input")
        .expect("the refused call's receipt");
    assert_eq!(
        refused["attempts"], 0,
        "{client}: the refused call reached the upstream"
    );
}

/// Proves: the Python SDK 2.x, launching `narrowgate stdio` as its stdio server, lists exactly
/// the contracts' tools (with the SDK 1.x too), gets a working call's answer, is refused an
/// argument outside the contract (nothing sent upstream), approves an `approval: user` call
/// through its elicitation callback (asked once) and answers the upstream's sampling request
/// through its sampling callback (asked once), all validated by the SDK itself.
#[test]
fn python_sdk_stdio_clients_launch_the_gateway() {
    let dir = setup();
    for client in [PyClient::V2("auto"), PyClient::V1] {
        let listed = client.run(&target(&dir), "-", &json!([{"op": "list"}]));
        assert_eq!(tool_names(&listed["results"][0]), TOOLS, "{listed}");
    }
    // `legacy`: an `initialize` session; `auto`: the SDK's default, 2026-07-28 where offered.
    for mode in ["legacy", "auto"] {
        let ran = run(
            Command::new(py2_python())
                .arg(py_client_script("py2_asks_client.py"))
                .args([&target(&dir), "-", "all", &calls().to_string(), mode])
                .env("PY_CLIENT_TIMEOUT", "30"),
            CLIENT_DEADLINE,
        );
        assert_eq!(ran.code, Some(0), "client failed ({mode}): {}", ran.stderr);
        let out = ran.json();
        let results: Vec<(bool, String)> = out["results"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| {
                        let text = r["text"].as_str().unwrap_or_default().to_string();
                        (r["is_error"].as_bool().unwrap_or(true), text)
                    })
                    .collect()
            })
            .unwrap_or_default();
        assert_answered(&format!("python 2.x {mode}"), &results);
        assert_eq!(out["called"]["elicitation"], 1, "{mode}: {out}");
        assert_eq!(out["called"]["sampling"], 1, "{mode}: {out}");
    }
    assert_receipts("python 2.x", &dir);
}

/// Proves: the TypeScript SDK's stdio client, launching `narrowgate stdio`, lists the contracts'
/// tools, is answered, refused, asked to approve (accepting) and asked to sample, each once.
#[test]
fn typescript_sdk_stdio_client_launches_the_gateway() {
    let dir = setup();
    let mut steps = vec![json!({"op": "list"})];
    for call in calls().as_array().into_iter().flatten() {
        steps.push(json!({"op": "call", "name": call[0], "arguments": call[1]}));
    }
    let out = ts_client(
        &target(&dir),
        "-",
        &json!({
            "steps": steps,
            "capabilities": {
                "sampling": "a sampled answer",
                "elicitation": {"action": "accept", "content": {"approve": true}},
            },
        }),
    );
    assert!(out.get("connect_error").is_none(), "{out}");
    let results = out["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(tool_names(&results[0]), TOOLS, "{out}");
    let answers: Vec<(bool, String)> = results[1..]
        .iter()
        .map(|r| {
            let text = r["content"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            (r["is_error"].as_bool().unwrap_or(true), text)
        })
        .collect();
    assert_answered("typescript", &answers);
    assert_eq!(out["asked"]["elicitation"], 1, "{out}");
    assert_eq!(out["asked"]["sampling"], 1, "{out}");
    assert_receipts("typescript", &dir);
}

/// The Inspector CLI (`@modelcontextprotocol/inspector` `--cli`) launching `narrowgate stdio`
/// for one method: its JSON result, or the exception it printed.
fn inspector(dir: &ConfigDir, method: &[&str]) -> Value {
    let home = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(node_bin("mcp-inspector"));
    cmd.env("HOME", home.path())
        .args(["--cli", "--format", "json", "--connect-timeout", "60000"])
        .args(["-e", &format!("NARROWGATE_API_KEY={KEY}")])
        .args(method)
        .arg("--")
        .arg(narrowgate_bin())
        .args(["stdio", "--config"])
        .arg(dir.config());
    let ran = run(&mut cmd, CLIENT_DEADLINE);
    // Exit 5: a tool result with isError, printed like any result.
    assert!(
        matches!(ran.code, Some(0) | Some(5)),
        "inspector {method:?}: {}\n{}",
        ran.stdout,
        ran.stderr
    );
    ran.json()["result"].take()
}

/// Proves: the Inspector CLI, launching `narrowgate stdio` once per method, lists the contracts'
/// tools, gets a call's answer and is refused an argument outside the contract; it declares no
/// elicitation or sampling, so the approval is refused without asking (the call is not
/// forwarded) and the upstream's sampling request is refused upstream: both are tool errors the
/// CLI prints, never a hang.
#[test]
fn the_inspector_cli_launches_the_gateway() {
    let dir = setup();
    let listed = inspector(&dir, &["--method", "tools/list"]);
    assert_eq!(tool_names(&listed), TOOLS, "{listed}");
    let call = |name: &str, arguments: Value| {
        let args = arguments.to_string();
        let result = inspector(
            &dir,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                name,
                "--tool-args-json",
                &args,
            ],
        );
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (result["isError"] == true, text)
    };
    assert_eq!(
        call("echo", json!({"message": "hi"})),
        (false, "Echo: hi".into())
    );
    let (refused, text) = call(
        "echo",
        json!({"message": "far longer than twenty characters"}),
    );
    assert!(
        refused && text.contains("arguments rejected by the contract"),
        "{text}"
    );
    let (refused, text) = call("echo_approved", json!({"message": "approved"}));
    assert!(refused && text.contains("approv"), "{text}");
    let (refused, text) = call("test_sampling", json!({"prompt": "say hi"}));
    assert!(refused, "sampling without a capable client: {text}");
    let receipts = receipts_json(&dir.config(), &["--tool", "echo_approved"]);
    assert!(
        receipts
            .iter()
            .all(|r| r["attempts"] == 0 && r["outcome"] == "denied"),
        "the unapproved call was forwarded: {receipts:?}"
    );
}
