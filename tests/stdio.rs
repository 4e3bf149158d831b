//! `narrowgate stdio` as a desktop client launches it: MCP over its stdin and stdout, the caller
//! from `NARROWGATE_API_KEY` or `stdio.caller`, every policy as under `serve`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{
    ConfigDir, KEY, callers, contract_file, demo_stdio_config, echo_tool, narrowgate_bin,
    receipts_json,
};

fn setup(extra: &str) -> ConfigDir {
    let callers = format!(
        "{}  - name: mallory\n    api_key_sha256: {}\n    tools: []\n",
        callers(&[]),
        crate::common::hash_key("test-key-mallory")
    );
    ConfigDir::new(
        &demo_stdio_config(&callers, extra),
        &[(
            "demo.yaml",
            &contract_file("demo", &[&echo_tool("echo", 20, "")]),
        )],
    )
}

/// Runs `narrowgate stdio` with `key`, sends `messages` (one JSON-RPC message a line), closes
/// stdin and returns every line of stdout, the exit status and stderr.
fn run_stdio(dir: &ConfigDir, key: Option<&str>, messages: &[Value]) -> (Vec<String>, i32, String) {
    let mut command = Command::new(narrowgate_bin());
    command
        .args(["stdio", "--config"])
        .arg(dir.config())
        .env_remove("NARROWGATE_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(key) = key {
        command.env("NARROWGATE_API_KEY", key);
    }
    let mut child = command.spawn().expect("start narrowgate stdio");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map(|l| l.expect("stdout is UTF-8"))
            .collect::<Vec<String>>()
    });
    let answers_expected = messages.iter().filter(|m| m.get("id").is_some()).count();
    for message in messages {
        if writeln!(stdin, "{message}").is_err() {
            break;
        }
    }
    // The answers come before stdin closes: closing ends the session.
    std::thread::sleep(Duration::from_millis(if answers_expected > 0 {
        3000
    } else {
        0
    }));
    drop(stdin);
    let status = child.wait().expect("wait for narrowgate stdio");
    let lines = reader.join().expect("stdout reader");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    (lines, status.code().unwrap_or(-1), stderr)
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn handshake() -> Vec<Value> {
    vec![
        request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "stdio-test", "version": "1"}}),
        ),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

/// Proves: a client that launches `narrowgate stdio` with a caller's key lists that caller's
/// narrowed tools, gets an in-contract call answered and an out-of-contract one refused before
/// the upstream (both with receipts naming the caller); every byte on stdout is a JSON-RPC
/// message; the process exits 0 when stdin closes, leaving no upstream child behind.
#[test]
fn a_stdio_client_is_served_under_the_contract_and_stdout_is_mcp_only() {
    let dir = setup("");
    let mut messages = handshake();
    messages.push(request(2, "tools/list", json!({})));
    messages.push(request(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hello"}}),
    ));
    messages.push(request(
        4,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "far longer than twenty characters"}}),
    ));
    let (lines, code, stderr) = run_stdio(&dir, Some(KEY), &messages);
    assert_eq!(code, 0, "exit status; stderr: {stderr}");
    let answers: Vec<Value> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {l:?}\nstderr: {stderr}"))
        })
        .collect();
    assert!(answers.iter().all(|a| a["jsonrpc"] == "2.0"), "{answers:?}");
    let by_id = |id: u64| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no answer {id}: {answers:?}\n{stderr}"))
    };
    let listed = by_id(2);
    let tools: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["echo"], "{answers:?}");
    assert_eq!(
        by_id(3)["result"]["isError"],
        false,
        "{answers:?}\n{stderr}"
    );
    assert!(by_id(3)["result"].to_string().contains("hello"));
    // Refused before the upstream: a 2025-06-18 client gets the refusal as a JSON-RPC error.
    assert_eq!(by_id(4)["error"]["code"], -32602, "{answers:?}");
    assert!(
        by_id(4).to_string().contains("rejected by the contract"),
        "{answers:?}"
    );
    let receipts = receipts_json(&dir.config(), &[]);
    // Both calls were sent at once: their receipts' order is the order they ended in.
    let mut outcomes: Vec<(&str, &str)> = receipts
        .iter()
        .map(|r| {
            (
                r["caller"].as_str().unwrap_or(""),
                r["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        [("alice", "ok"), ("alice", "rejected_input")],
        "{receipts:?}"
    );
    // No demo upstream of this configuration is left running.
    let left = Command::new("pgrep")
        .args(["-f", &dir.config().display().to_string()])
        .output()
        .expect("pgrep");
    assert!(
        left.stdout.is_empty(),
        "left running: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

/// Proves: a caller's allowlist holds on stdio as on HTTP: `stdio.caller` names a caller with
/// no tools, whose list is empty and whose call of an existing tool is refused as unknown.
#[test]
fn the_configured_stdio_caller_gets_only_its_own_tools() {
    let dir = setup("stdio:\n  caller: mallory\n");
    let mut messages = handshake();
    messages.push(request(2, "tools/list", json!({})));
    messages.push(request(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi"}}),
    ));
    let (lines, code, stderr) = run_stdio(&dir, None, &messages);
    assert_eq!(code, 0, "{stderr}");
    let answers: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(answers.len(), lines.len(), "stdout: {lines:?}");
    let list = answers
        .iter()
        .find(|a| a["id"] == 2)
        .expect("tools/list answered");
    assert_eq!(list["result"]["tools"], json!([]), "{answers:?}");
    let call = answers
        .iter()
        .find(|a| a["id"] == 3)
        .expect("tools/call answered");
    assert!(
        call.to_string().contains("unknown tool") || call.get("error").is_some(),
        "{call}"
    );
}

/// Proves: an unknown key stops a stdio gateway before it serves anything: status 2, a message
/// on stderr saying what to set, nothing on stdout; with neither key nor `stdio.caller` too.
#[test]
fn an_unknown_key_or_no_caller_exits_2_with_a_message() {
    let dir = setup("");
    let (lines, code, stderr) = run_stdio(&dir, Some("not-a-key"), &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(lines.is_empty(), "stdout: {lines:?}");
    assert!(
        stderr.contains("NARROWGATE_API_KEY is no caller's key"),
        "{stderr}"
    );
    let (lines, code, stderr) = run_stdio(&dir, None, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(lines.is_empty(), "stdout: {lines:?}");
    assert!(stderr.contains("stdio: {caller: NAME}"), "{stderr}");
}
