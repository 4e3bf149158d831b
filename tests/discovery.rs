//! Tool search (`discovery: search`, docs/discovery.md) in front of what people run: the example
//! contracts on the demo upstream, and the contract library's `time`, `git` and `fetch` profiles
//! on the MCP project's servers. A scripted agent, which may only call what `search_tools`
//! returned, finds and calls the right tool for tasks worded as a model words them; the
//! TypeScript SDK checks the meta-tools' answers against their published schemas; a caller never
//! finds a tool it may not call.

use crate::common;
use crate::library::library_file;
use crate::peers::real_servers::py2_bin;
use crate::peers::real_servers::python::repository_with_one_commit;

use common::peers::{mcp_server_time, ts_client};
use common::{Gateway, KEY, call_answered, client, demo_stdio_config, hash_key, receipts_json};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};

/// The agent's key; `narrow` may call only the time tools.
const NARROW_KEY: &str = "narrow-key";

/// The gateway with four upstreams and two searching callers, and the repository git reads.
fn gateway() -> (Gateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = repository_with_one_commit(dir.path(), "the first commit");
    let callers = format!(
        "callers:\n  - name: agent\n    api_key_sha256: {}\n    tools: ['*']\n    \
         discovery: search\n    always: [echo]\n  - name: narrow\n    api_key_sha256: {}\n    \
         tools: [get_current_time, convert_time]\n    discovery: search\n",
        hash_key(KEY),
        hash_key(NARROW_KEY)
    );
    let extra = format!(
        "  time:\n    command: {}\n    args: [--local-timezone, UTC]\n  git:\n    command: {}\n    \
         args: [--repository, {}]\n  fetch:\n    command: {}\n",
        mcp_server_time().display(),
        py2_bin("mcp-server-git").display(),
        repo.display(),
        py2_bin("mcp-server-fetch").display(),
    );
    // The demo upstream's block, then the other upstreams, then the callers.
    let config = demo_stdio_config("", "").replace("upstreams:\n", &format!("upstreams:\n{extra}"))
        + &callers;
    let demo = std::fs::read_to_string(common::peers::repo_root().join("contracts/demo.yaml"))
        .expect("contracts/demo.yaml");
    let (time, git_file, fetch) = (
        library_file("time", "read-only"),
        library_file("git", "read-only"),
        library_file("fetch", "read-only"),
    );
    let gw = Gateway::spawn(
        &config,
        &[
            ("demo.yaml", &demo),
            ("time.yaml", &time),
            ("git.yaml", &git_file),
            ("fetch.yaml", &fetch),
        ],
        &[("GIT_REPOSITORY", &repo.display().to_string())],
    );
    gw.wait_ready(std::time::Duration::from_secs(60));
    gw.wait_tools_joined("time", &["get_current_time"]);
    gw.wait_tools_joined("git", &["git_log"]);
    (gw, dir)
}

/// The names a `search_tools` answer lists, best first, with their availability.
fn found(result: &rmcp::model::CallToolResult) -> Vec<(String, Value)> {
    let structured = result
        .structured_content
        .as_ref()
        .expect("structured answer");
    structured["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or_default().to_string(),
                t["availability"].clone(),
            )
        })
        .collect()
}

/// One task of the scripted agent: the words it searches with, the tool that does it, and the
/// arguments it would give that tool.
struct Task {
    query: &'static str,
    tool: &'static str,
    arguments: Value,
}

/// The scripted agent: for each task it searches, takes the first executable tool the answer
/// lists (it knows no other names), checks it is the tool that does the task, and calls it with
/// `call_tool`. Returns each call's answer.
async fn agent(
    c: &RunningService<RoleClient, ()>,
    tasks: &[Task],
) -> Vec<rmcp::model::CallToolResult> {
    let mut answers = Vec::new();
    for task in tasks {
        let search =
            call_answered(c, "search_tools", json!({"query": task.query, "limit": 5})).await;
        assert_ne!(search.is_error, Some(true), "{}: {search:?}", task.query);
        let found = found(&search);
        let chosen = found
            .iter()
            .find(|(_, availability)| availability == "executable")
            .map(|(name, _)| name.clone())
            .unwrap_or_else(|| panic!("{}: nothing executable in {found:?}", task.query));
        assert_eq!(
            chosen, task.tool,
            "{}: the search put first {found:?}",
            task.query
        );
        let answer = call_answered(
            c,
            "call_tool",
            json!({"name": chosen, "arguments": task.arguments}),
        )
        .await;
        answers.push(answer);
    }
    answers
}

/// Proves: a searching caller is listed only `search_tools`, `call_tool` and its `always` tools;
/// a scripted agent that may only call what a search returned finds and calls the right tool
/// among the demo's and the library's tools for tasks worded as a model words them (the
/// weather, a sum, the current time in Tokyo, the recent commits), through the whole pipeline: the
/// receipts name the real tools, and an out-of-contract argument passed through `call_tool` is
/// refused as `invalid_arguments`.
#[tokio::test]
async fn a_scripted_agent_finds_and_calls_the_right_tools() {
    let (gw, _dir) = gateway();
    let c = client(&gw.url, KEY).await;
    let mut listed = common::tool_names(&c).await;
    listed.sort();
    assert_eq!(listed, ["call_tool", "echo", "search_tools"]);

    let tasks = [
        Task {
            query: "what is the weather like in Chicago",
            tool: "get_weather",
            arguments: json!({"location": "Chicago"}),
        },
        Task {
            query: "add two numbers",
            tool: "add",
            arguments: json!({"a": 2, "b": 40}),
        },
        Task {
            query: "current time in Tokyo",
            tool: "get_current_time",
            arguments: json!({"timezone": "Asia/Tokyo"}),
        },
        Task {
            query: "recent commits",
            tool: "git_log",
            arguments: json!({"max_count": 3}),
        },
    ];
    let answers = agent(&c, &tasks).await;
    for (task, answer) in tasks.iter().zip(&answers) {
        assert_ne!(
            answer.is_error,
            Some(true),
            "{}: {answer:?}\n{}",
            task.tool,
            gw.log()
        );
    }
    assert_eq!(
        answers[2]
            .structured_content
            .as_ref()
            .map(|s| s["timezone"].clone()),
        Some(json!("Asia/Tokyo"))
    );
    assert!(
        common::text_of(&answers[3]).contains("the first commit"),
        "{:?}",
        answers[3]
    );
    // `call_tool` is the tool's own call: its contract still refuses what it does not allow.
    let refused = call_answered(
        &c,
        "call_tool",
        json!({"name": "add", "arguments": {"a": 5000, "b": 1}}),
    )
    .await;
    let error = &refused.structured_content.as_ref().expect("typed")["error"];
    assert_eq!(error["type"], "invalid_arguments", "{refused:?}");

    let receipts = receipts_json(&gw.config_path(), &[]);
    for task in &tasks {
        assert!(
            receipts
                .iter()
                .any(|r| r["tool"] == task.tool && r["outcome"] == "ok"),
            "{}: {receipts:#?}",
            task.tool
        );
    }
    assert!(
        !receipts.iter().any(|r| r["tool"] == "call_tool"),
        "{receipts:#?}"
    );
}

/// Proves: a search never returns a tool the caller may not call, whatever it asks (the
/// narrow caller's searches for the demo's and git's tools find only its time tools or
/// nothing), and a tool it may not call is not callable through `call_tool` either; the same
/// query over the same catalogue answers the same list every time.
#[tokio::test]
async fn a_search_never_returns_what_the_caller_may_not_call() {
    let (gw, _dir) = gateway();
    let narrow = client(&gw.url, NARROW_KEY).await;
    for query in [
        "refund an order",
        "show me the recent commits",
        "weather in Chicago",
        "git_log",
        "time",
        "convert a time between time zones",
    ] {
        let answer = call_answered(&narrow, "search_tools", json!({"query": query})).await;
        for (name, _) in found(&answer) {
            assert!(
                name == "get_current_time" || name == "convert_time",
                "{query}: {name} was returned"
            );
        }
    }
    // As a direct call of a tool it may not use: the same answer as for no such tool.
    let refused = common::call(&narrow, "call_tool", json!({"name": "git_log"})).await;
    let error = refused.expect_err("refused");
    assert!(error.contains("Unknown tool: git_log"), "{error}");
    let agent = client(&gw.url, KEY).await;
    let first = call_answered(&agent, "search_tools", json!({"query": "read a file"})).await;
    for _ in 0..5 {
        let again = call_answered(&agent, "search_tools", json!({"query": "read a file"})).await;
        assert_eq!(found(&again), found(&first));
    }
    // The approval tool is found, and said to need an approval.
    let refund = call_answered(&agent, "search_tools", json!({"query": "refund an order"})).await;
    let refund = found(&refund);
    let availability = &refund
        .iter()
        .find(|(n, _)| n == "refund_order")
        .expect("found")
        .1;
    assert_eq!(availability["status"], "blocked", "{refund:?}");
}

/// Proves: the TypeScript SDK, which validates every structured answer against the published
/// output schema, accepts `search_tools`' answers and a call through `call_tool`.
#[test]
fn the_typescript_sdk_searches_and_calls() {
    let (gw, _dir) = gateway();
    let out = ts_client(
        &gw.url,
        KEY,
        &json!({"steps": [
            {"op": "list"},
            {"op": "call", "name": "search_tools", "arguments": {"query": "current time in Tokyo"}},
            {"op": "call", "name": "call_tool",
             "arguments": {"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}},
            {"op": "call", "name": "search_tools", "arguments": {"query": ""}},
        ]}),
    );
    let r = &out["results"];
    assert!(r.is_array(), "{out}");
    for (i, step) in r.as_array().into_iter().flatten().enumerate() {
        assert!(step.get("error").is_none(), "step {i}: {step}");
    }
    let names: Vec<&str> = r[1]["structured_content"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names.first(), Some(&"get_current_time"), "{}", r[1]);
    assert_eq!(r[2]["is_error"], false, "{}", r[2]);
    assert_eq!(
        r[3]["structured_content"]["error"]["type"], "invalid_arguments",
        "{}",
        r[3]
    );
}
