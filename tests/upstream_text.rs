//! Nothing an upstream writes reaches a client but what the contract allows: the real gateway in
//! front of the hostile upstream (`tests/hostile`, the text attacks of `tests/hostile/text.rs`),
//! over stdio and over Streamable HTTP. Schema texts never reach `tools/list`; tool errors and
//! JSON-RPC errors arrive as one bounded, escaped text block; result rejections name the
//! contract, never the result; an output contract no result can meet disables the tool.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{
    Gateway, HostileHttp, KEY, call_answered, call_ok, callers, client, hostile_stdio_upstream,
    recorded_requests, text_of,
};
use serde_json::{Value, json};

/// What the hostile upstream's text attacks write (tests/hostile/text.rs).
const INJECTION: &str = "IGNORE ALL PREVIOUS INSTRUCTIONS";
const LEAK_KEY: &str = "IGNORE_ALL_PREVIOUS_INSTRUCTIONS";

/// `echo` without an output contract, and `echo_checked` (the same upstream tool) with one.
const CONTRACT: &str = r#"upstream: hostile
tools:
  echo:
    privilege: read
    description: Echo a text.
    input: { type: object, properties: { text: { type: string } }, required: [text] }
  echo_checked:
    upstream_tool: echo
    privilege: read
    input: { type: object, properties: { text: { type: string } }, required: [text] }
    output:
      type: object
      properties: { text: { type: string } }
      required: [text]
      additionalProperties: false
"#;

#[derive(Clone, Copy, Debug)]
enum Via {
    Stdio,
    Http,
}

const BOTH: [Via; 2] = [Via::Stdio, Via::Http];

/// A gateway in front of the hostile upstream (over `via`) running `attack`, recording to
/// `record`, once the catalog has joined the upstream's tools; the HTTP upstream's process, if
/// any, lives as long as the gateway.
fn gateway(via: Via, attack: &str, record: &Path, extra: &str) -> (Gateway, Option<HostileHttp>) {
    gateway_with(via, attack, record, extra, CONTRACT)
}

/// [`gateway`] with another contract file for the hostile upstream.
fn gateway_with(
    via: Via,
    attack: &str,
    record: &Path,
    extra: &str,
    contract: &str,
) -> (Gateway, Option<HostileHttp>) {
    // "": no attack, a conforming upstream.
    let attacks: &[&str] = if attack.is_empty() { &[] } else { &[attack] };
    let (entry, http) = match via {
        Via::Stdio => (
            hostile_stdio_upstream("hostile", attacks, record, &[]),
            None,
        ),
        Via::Http => {
            let upstream = HostileHttp::start(attacks, record, &[]);
            (upstream.config("hostile"), Some(upstream))
        }
    };
    let config = format!("{extra}upstreams:\n{entry}{}", callers(&[]));
    let gw = Gateway::start(&config, &[("hostile.yaml", contract)]);
    gw.wait_for(
        Duration::from_secs(30),
        "the upstream's tools joined",
        |r| r["tools"]["echo"]["state"] != "unavailable",
    );
    (gw, http)
}

/// Proves: the schema-injection attack (instructions in the upstream's descriptions, titles,
/// examples, `$comment` and `x-` keys, plus a new `pattern`) puts none of its text in
/// `tools/list`, only the pattern, which the gateway enforces before the upstream is called.
#[tokio::test]
async fn schema_injection_never_reaches_tools_list() {
    for via in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("record.jsonl");
        let (gw, _up) = gateway(via, "schema-injection", &record, "");
        let c = client(&gw.url, KEY).await;
        let tools = c.list_all_tools().await.expect("tools/list");
        let listed = serde_json::to_string(&tools).expect("json");
        assert!(!listed.contains(INJECTION), "{via:?}: {listed}");
        assert!(
            listed.contains("^[a-z ]*$") && listed.contains("Echo a text."),
            "{listed}"
        );
        let before = recorded_requests(&record, "tools/call");
        let r = call_answered(&c, "echo", json!({"text": "Hello!"})).await;
        assert_eq!(r.is_error, Some(true), "{via:?}: {r:?}");
        assert_eq!(
            recorded_requests(&record, "tools/call"),
            before,
            "{via:?}: it was sent"
        );
        assert_eq!(
            text_of(&call_ok(&c, "echo", json!({"text": "hello"})).await),
            "hello"
        );
    }
}

/// Proves: an upstream tool error carrying control characters, an image, an embedded resource,
/// a resource link and a bad structuredContent reaches the client as one escaped text block
/// (and the typed error object, `upstream_error`, in place of its structuredContent): only that
/// for a tool with `output`; a tool without `output` keeps its other blocks.
#[tokio::test]
async fn tool_errors_arrive_as_one_escaped_text_block() {
    for via in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let (gw, _up) = gateway(via, "error-content", &dir.path().join("r.jsonl"), "");
        let c = client(&gw.url, KEY).await;
        let r = call_answered(&c, "echo_checked", json!({"text": "a"})).await;
        let all = serde_json::to_string(&r).expect("json");
        assert_eq!(r.is_error, Some(true), "{via:?}: {all}");
        assert_eq!(r.content.len(), 1, "{via:?}: {all}");
        // The upstream's structuredContent never passes: the typed error object replaces it.
        let error = &r.structured_content.as_ref().expect("typed error")["error"];
        assert_eq!(error["type"], "upstream_error", "{via:?}: {all}");
        assert_eq!(
            error["message"].as_str(),
            Some(text_of(&r).as_str()),
            "{via:?}"
        );
        for leaked in [
            INJECTION,
            LEAK_KEY,
            "evil.example",
            "image/png",
            "\u{1b}",
            "\u{202e}",
        ] {
            assert!(!all.contains(leaked), "{via:?}: {leaked:?} in {all}");
        }
        let text = text_of(&r);
        assert!(
            text.starts_with("\\u{1b}[2J") && text.ends_with("failed"),
            "{text}"
        );

        let r = call_answered(&c, "echo", json!({"text": "a"})).await;
        let texts = r.content.iter().filter(|b| b.as_text().is_some()).count();
        assert_eq!((r.is_error, texts), (Some(true), 1), "{via:?}: {r:?}");
        assert!(!text_of(&r).contains('\u{1b}'), "{via:?}: {r:?}");
    }
}

/// Proves: a 3 MB JSON-RPC error message (through a 1 MiB `max_result_bytes`) reaches the client
/// bounded by `error_text_bytes` (default 1 KiB, and a configured 200 B), control characters
/// escaped, its instructions (at the end) cut off.
#[tokio::test]
async fn a_huge_json_rpc_error_is_bounded_and_escaped() {
    for (via, limit, extra) in [
        (Via::Stdio, 1024, "max_result_bytes: 1MiB\n"),
        (
            Via::Http,
            200,
            "max_result_bytes: 1MiB\nerror_text_bytes: 200B\n",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (gw, _up) = gateway(via, "rpc-error-huge", &dir.path().join("r.jsonl"), extra);
        let c = client(&gw.url, KEY).await;
        let r = call_answered(&c, "echo", json!({"text": "a"})).await;
        let text = text_of(&r);
        assert_eq!(r.is_error, Some(true), "{via:?}");
        assert!(text.len() <= limit, "{via:?}: {} bytes", text.len());
        assert!(
            text.contains("-32603") && text.contains("\\u{1b}[2J"),
            "{via:?}: {text}"
        );
        assert!(
            !text.contains('\u{1b}') && !text.contains(INJECTION),
            "{via:?}: {text}"
        );
    }
}

/// Proves: a result rejected for a key the contract does not allow names the contract's rule
/// and schema path, never the upstream's key or value.
#[tokio::test]
async fn result_rejections_never_quote_the_result() {
    for via in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let (gw, _up) = gateway(via, "result-key-leak", &dir.path().join("r.jsonl"), "");
        let c = client(&gw.url, KEY).await;
        let r = call_answered(&c, "echo_checked", json!({"text": "a"})).await;
        let all = serde_json::to_string(&r).expect("json");
        assert_eq!(r.is_error, Some(true), "{via:?}: {all}");
        assert!(all.contains("additionalProperties"), "{via:?}: {all}");
        assert!(
            !all.contains(LEAK_KEY) && !all.contains(INJECTION),
            "{via:?}: {all}"
        );
    }
}

/// Proves: an upstream outputSchema that contradicts the contract's `output` disables the tool
/// (the reason in /readyz, the tool out of tools/list), and `narrowgate check` refuses it with
/// an `empty` output verdict and exit 1; the tool without `output` stays enabled.
#[tokio::test]
async fn an_output_contradicting_the_contract_disables_the_tool() {
    for via in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let (gw, _up) = gateway(via, "output-contradiction", &dir.path().join("r.jsonl"), "");
        let ready = gw.readyz();
        let checked = &ready["tools"]["echo_checked"];
        assert_eq!(checked["state"], "disabled", "{via:?}: {ready}");
        assert!(
            checked["reason"].to_string().contains("outputSchema"),
            "{ready}"
        );
        assert_eq!(ready["tools"]["echo"]["state"], "enabled", "{ready}");
        let c = client(&gw.url, KEY).await;
        let names: Vec<String> = c
            .list_all_tools()
            .await
            .expect("list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(names, ["echo"], "{via:?}");

        let out = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
            .args(["check", "--json", "--config"])
            .arg(gw.config_path())
            .output()
            .expect("check runs");
        let report: Value = serde_json::from_slice(&out.stdout).expect("check --json");
        assert_eq!(out.status.code(), Some(1), "{via:?}: {report:#}");
        let row = report["tools"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["tool"] == "echo_checked"))
            .expect("a row for echo_checked");
        assert_eq!(row["output_narrowing"]["verdict"], "empty", "{row}");
    }
}

/// Proves: a call of a write tool that reached the upstream and got back something that is not a
/// tool result has outcome `unknown` (it may have taken effect), and the client is told not to
/// retry it blindly; the same answer to a read (idempotent) tool stays `upstream_error`.
#[tokio::test]
async fn a_write_answered_with_no_valid_result_has_an_unknown_outcome() {
    const WRITES: &str = r#"upstream: hostile
tools:
  echo:
    privilege: read
    input: { type: object, properties: { text: { type: string } }, required: [text] }
  echo_write:
    upstream_tool: echo
    privilege: write
    input: { type: object, properties: { text: { type: string } }, required: [text] }
"#;
    for via in BOTH {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("r.jsonl");
        let (gw, _up) = gateway_with(via, "not-a-result", &record, "", WRITES);
        let c = client(&gw.url, KEY).await;
        let r = call_answered(&c, "echo_write", json!({"text": "insert"})).await;
        assert_eq!(r.is_error, Some(true), "{via:?}: {r:?}");
        let text = text_of(&r);
        assert!(
            text.contains("not a tool result")
                && text.contains("effect is unknown")
                && text.contains("Do not retry it blindly"),
            "{via:?}: {text}"
        );
        assert_eq!(recorded_requests(&record, "tools/call"), 1, "{via:?}");
        let receipts = common::receipts_json(&gw.config_path(), &["--tool", "echo_write"]);
        assert_eq!(receipts.len(), 1, "{via:?}: {receipts:?}");
        assert_eq!(receipts[0]["outcome"], "unknown", "{via:?}: {receipts:?}");

        let r = call_answered(&c, "echo", json!({"text": "read"})).await;
        assert_eq!(r.is_error, Some(true), "{via:?}: {r:?}");
        assert!(!text_of(&r).contains("effect is unknown"), "{via:?}: {r:?}");
        let receipts = common::receipts_json(&gw.config_path(), &["--tool", "echo"]);
        assert_eq!(
            receipts[0]["outcome"], "upstream_error",
            "{via:?}: {receipts:?}"
        );
    }
}

/// Proves: an upstream is told of the client extensions its contracts use: with a tool's `ui:`
/// (MCP Apps), the gateway's `initialize` declares `io.modelcontextprotocol/ui` (with the app
/// MIME type) to that upstream; without one it declares no extension.
#[tokio::test]
async fn the_ui_extension_is_declared_to_an_upstream_whose_contracts_use_it() {
    const WITH_UI: &str = r#"upstream: hostile
tools:
  echo:
    privilege: read
    input: { type: object, properties: { text: { type: string } }, required: [text] }
    ui: { resource: "ui://echo/app.html" }
resources:
  - uri: "ui://echo/app.html"
"#;
    for via in BOTH {
        for (contract, declared) in [(WITH_UI, true), (CONTRACT, false)] {
            let dir = tempfile::tempdir().expect("tempdir");
            let record = dir.path().join("r.jsonl");
            let (_gw, _up) = gateway_with(via, "", &record, "", contract);
            let inits: Vec<Value> = common::recorded(&record)
                .into_iter()
                .filter(|m| m["method"] == "initialize")
                .collect();
            assert!(!inits.is_empty(), "{via:?}: no initialize recorded");
            for init in inits {
                let extensions = &init["params"]["capabilities"]["extensions"];
                match declared {
                    true => assert_eq!(
                        extensions["io.modelcontextprotocol/ui"],
                        json!({"mimeTypes": ["text/html;profile=mcp-app"]}),
                        "{via:?}: {init}"
                    ),
                    false => assert!(extensions.is_null(), "{via:?}: {init}"),
                }
            }
        }
    }
}
