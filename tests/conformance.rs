//! The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, installed into
//! `.peers/conformance` by `tests/setup-peers.sh`) against the repository's demo upstream, run by
//! `tests/conformance/run.sh`, the same harness that measures the gateway
//! (`tests/conformance/run.sh --through-gateway`). A missing suite fails with a pointer to the setup
//! script. Also what the gateway's relays are measured against and the suite does not check:
//! resource updates reach only subscribed sessions, `logging/setLevel` filters per session,
//! `list_roots` asks the caller for its roots, and `echo_meta` shows the `_meta` that arrived.
// Logging and resources/subscribe are deprecated by SEP-2577 (2026-07-28) in rmcp; 2025-11-25
// sessions, which the suite and these tests use, still carry them.
#![allow(deprecated)]

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::peers::repo_root;
use common::{HttpUpstream, demo_upstream_bin, tool_params};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ListRootsResult,
    LoggingLevel, LoggingMessageNotificationParam, ResourceUpdatedNotificationParam, Root,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;
use tokio::sync::mpsc;

/// The server scenarios of the suite's "active" set in 0.1.16 (`conformance list`, without the
/// pending `json-schema-2020-12` and `server-sse-polling`).
const ACTIVE_SCENARIOS: [&str; 30] = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
];

/// The whole suite takes a few seconds; this only bounds a hang.
const DEADLINE: Duration = Duration::from_secs(240);

/// Runs `tests/conformance/run.sh` with `args`, returning its exit code and its output; the run is
/// stopped (SIGTERM, so the script stops what it started) and the test fails after [`DEADLINE`].
fn run_harness(args: &[&str], results: &Path) -> (Option<i32>, String) {
    let out = results.with_extension("out");
    let log = std::fs::File::create(&out).expect("output file");
    let mut child = Command::new(repo_root().join("tests/conformance/run.sh"))
        .args(["--no-build", "--results"])
        .arg(results)
        .args(args)
        .env("NARROWGATE_BIN", env!("CARGO_BIN_EXE_narrowgate"))
        .env("DEMO_UPSTREAM_BIN", demo_upstream_bin())
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("output file"))
        .stderr(log)
        .spawn()
        .expect("start tests/conformance/run.sh");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for run.sh") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
            panic!(
                "run.sh did not finish within {DEADLINE:?}; its output:\n{}",
                std::fs::read_to_string(&out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (
        status.code(),
        std::fs::read_to_string(&out).unwrap_or_default(),
    )
}

/// Proves the demo upstream is a complete conformance fixture: every active server scenario of
/// the suite passes against it directly, so that whatever fails through the gateway
/// (`run.sh --through-gateway`) is the gateway's. Fails if a fixture tool, resource or prompt
/// changes shape, or if the suite runs fewer scenarios than its active set.
#[test]
fn every_active_server_scenario_passes_against_the_demo_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results.tsv");
    let (code, output) = run_harness(&[], &results);
    assert_eq!(code, Some(0), "run.sh failed; its output:\n{output}");

    let table = std::fs::read_to_string(&results).expect("run.sh wrote --results");
    let mut seen = BTreeSet::new();
    for row in table.lines().skip(1) {
        let cells: Vec<&str> = row.split('\t').collect();
        assert_eq!(cells.get(1), Some(&"pass"), "{row}\n{output}");
        seen.insert(cells[0].to_owned());
    }
    let expected: BTreeSet<String> = ACTIVE_SCENARIOS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        seen, expected,
        "the scenarios run differ from the active set:\n{output}"
    );
}

/// Runs the active scenarios against the demo upstream started with `flags`, directly and
/// through the gateway (configured as `narrowgate init` scaffolds it, by `run.sh
/// --through-gateway`), and fails naming every scenario that passes directly but not through
/// the gateway.
fn assert_no_scenario_fails_only_through_the_gateway(flags: &str) {
    assert_none_fails_only_through_the_gateway("active", flags, ACTIVE_SCENARIOS.len());
}

/// The same for the scenarios of `suite`, of which there are `scenarios`.
fn assert_none_fails_only_through_the_gateway(suite: &str, flags: &str, scenarios: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results.tsv");
    let args = ["--through-gateway", "--suite", suite, "--demo-flags", flags];
    let (code, output) = run_harness(&args, &results);
    let table = std::fs::read_to_string(&results).unwrap_or_default();
    let only_through_gateway: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let cells: Vec<&str> = row.split('\t').collect();
            (cells.get(1) == Some(&"pass") && cells.get(2) != Some(&"pass")).then(|| cells[0])
        })
        .collect();
    assert!(
        only_through_gateway.is_empty(),
        "demo upstream {flags:?}: fail only through the gateway: {only_through_gateway:?}\n{output}"
    );
    assert_eq!(
        code,
        Some(0),
        "demo upstream {flags:?}: run.sh --through-gateway failed; its output:\n{output}"
    );
    assert_eq!(
        table.lines().skip(1).count(),
        scenarios,
        "demo upstream {flags:?}: the scenarios run differ from the {suite} set:\n{output}"
    );
}

/// Proves the suite's pending server scenarios (0.1.16: `json-schema-2020-12`,
/// `server-sse-polling`) pass against the demo upstream directly and none fails only through
/// the gateway, in front of the demo upstream by default and like the reference server.
#[test]
fn no_pending_scenario_fails_only_through_the_gateway() {
    for flags in ["", "--modern-declares-less --listen-ndjson"] {
        assert_none_fails_only_through_the_gateway("pending", flags, 2);
    }
}

/// Proves the gateway costs a client nothing the suite checks, in front of the demo upstream as
/// it starts by default (2026-07-28): no scenario fails through the gateway that passes directly.
/// Fails when one does (before the relays of sampling, elicitation, roots and logging, six did),
/// naming them.
#[test]
fn no_scenario_fails_only_through_the_gateway() {
    assert_no_scenario_fails_only_through_the_gateway("");
}

/// Proves the same in front of a 2025-11-25 upstream (`--legacy`: sessions only).
#[test]
fn no_scenario_fails_only_through_the_gateway_to_a_legacy_upstream() {
    assert_no_scenario_fails_only_through_the_gateway("--legacy");
}

/// Proves the same in front of an upstream that, like the suite's reference server, declares
/// less on 2026-07-28 than in a session (`--modern-declares-less`: no resource subscriptions,
/// no completions there). Fails when the gateway keeps such an upstream on 2026-07-28 (it did:
/// resources-subscribe and resources-unsubscribe waited for a stream the upstream never
/// acknowledged, "upstream did not answer within 30s").
#[test]
fn no_scenario_fails_only_through_the_gateway_to_an_upstream_that_declares_less_on_2026() {
    assert_no_scenario_fails_only_through_the_gateway("--modern-declares-less");
}

/// Proves the same in front of an upstream that, like the suite's reference server, answers
/// `subscriptions/listen` with newline-delimited JSON acknowledging only list changes, and
/// quotes the request id in its subscription id (`--listen-ndjson`). Fails when the gateway
/// reads the stream as rmcp does (it did: the acknowledgment never came, and
/// resources-subscribe and resources-unsubscribe failed).
#[test]
fn no_scenario_fails_only_through_the_gateway_to_an_upstream_whose_listen_is_ndjson() {
    assert_no_scenario_fails_only_through_the_gateway("--listen-ndjson");
}

/// Proves the same in front of an upstream that on 2026-07-28 asks the client with requests on
/// the call's own answer stream, as a session would (`--asks-on-stream`): the gateway relays
/// them to the calling client and posts the answers back. (It did so before this mode existed:
/// this guards the relay, and shows the reference server's sampling and elicitation failures
/// were not the gateway refusing such requests.)
#[test]
fn no_scenario_fails_only_through_the_gateway_to_an_upstream_that_asks_on_the_call_stream() {
    assert_no_scenario_fails_only_through_the_gateway("--asks-on-stream");
}

/// Proves the same in front of a 2025-11-25 upstream that asks the client on the session's
/// standalone stream (`GET`), not on the call's answer stream (`--legacy
/// --asks-on-standalone`), as the suite's reference server at 0.1.16 does: such a request is
/// the call's when it is the only call in flight. Fails when the gateway refuses every request
/// from that stream (it did, -32601: tools-call-sampling, tools-call-elicitation,
/// elicitation-sep1034-defaults and elicitation-sep1330-enums failed only through it).
#[test]
fn no_scenario_fails_only_through_the_gateway_to_an_upstream_that_asks_on_its_standalone_stream() {
    assert_no_scenario_fails_only_through_the_gateway("--legacy --asks-on-standalone");
}

/// Proves the same in front of the demo upstream with every way of the reference server at
/// once (`--modern-declares-less --listen-ndjson`).
#[test]
fn no_scenario_fails_only_through_the_gateway_to_an_upstream_like_the_reference_server() {
    assert_no_scenario_fails_only_through_the_gateway("--modern-declares-less --listen-ndjson");
}

/// A client that forwards the resource updates and log messages it receives to channels.
#[derive(Clone)]
struct Listener {
    updates: mpsc::UnboundedSender<String>,
    logs: mpsc::UnboundedSender<String>,
}

impl ClientHandler for Listener {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.logs.send(params.data.to_string());
    }
}

struct Session {
    client: RunningService<RoleClient, Listener>,
    updates: mpsc::UnboundedReceiver<String>,
    logs: mpsc::UnboundedReceiver<String>,
}

async fn session(url: &str) -> Session {
    let (updates_tx, updates) = mpsc::unbounded_channel();
    let (logs_tx, logs) = mpsc::unbounded_channel();
    let listener = Listener {
        updates: updates_tx,
        logs: logs_tx,
    };
    let client = listener
        .serve(StreamableHttpClientTransport::from_uri(url))
        .await
        .expect("rmcp client connects to the demo upstream");
    Session {
        client,
        updates,
        logs,
    }
}

/// The next item of `rx`, or a panic naming `what` after a deadline.
async fn next(rx: &mut mpsc::UnboundedReceiver<String>, what: &str) -> String {
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("no {what} within 10 s"))
        .unwrap_or_else(|| panic!("the {what} channel closed"))
}

/// `touch_resource` on `uri`: how many sessions it reached.
async fn touch(s: &Session, uri: &str) -> u64 {
    let result = s
        .client
        .call_tool(tool_params("touch_resource", json!({"uri": uri})))
        .await
        .expect("touch_resource");
    let notified = result
        .structured_content
        .as_ref()
        .map(|v| v["notified"].clone());
    notified
        .and_then(|n| n.as_u64())
        .unwrap_or_else(|| panic!("touch_resource answered {result:?}"))
}

/// Proves `notifications/resources/updated` reaches exactly the sessions subscribed to the URI
/// and stops after `resources/unsubscribe`: what a gateway relaying subscriptions per session is
/// measured against. Updates on one session arrive in order, so receiving the later
/// `static-text` update first shows that no `watched-resource` update came after unsubscribing.
#[tokio::test]
async fn resource_updates_reach_only_subscribed_sessions() {
    const WATCHED: &str = "test://watched-resource";
    let upstream = HttpUpstream::start(&[]);
    let mut alice = session(&upstream.url).await;
    let bob = session(&upstream.url).await;

    assert_eq!(touch(&bob, WATCHED).await, 0, "nobody subscribed yet");
    let subscribe = |uri: &str| SubscribeRequestParams::new(uri);
    alice
        .client
        .subscribe(subscribe(WATCHED))
        .await
        .expect("subscribe");
    assert_eq!(touch(&bob, WATCHED).await, 1, "only alice subscribed");
    assert_eq!(next(&mut alice.updates, "update").await, WATCHED);

    let unsubscribe = UnsubscribeRequestParams::new(WATCHED);
    alice
        .client
        .unsubscribe(unsubscribe)
        .await
        .expect("unsubscribe");
    assert_eq!(touch(&bob, WATCHED).await, 0, "alice unsubscribed");
    let other = "test://static-text";
    alice
        .client
        .subscribe(subscribe(other))
        .await
        .expect("subscribe");
    assert_eq!(touch(&bob, other).await, 1);
    assert_eq!(next(&mut alice.updates, "update").await, other);
}

/// Proves `logging/setLevel` filters per session: at `warning` the logging tool's three info
/// messages do not come, at `debug` they do (messages of one session arrive in order, so the
/// three seen after the second call are all there is).
#[tokio::test]
async fn logging_level_filters_per_session() {
    let upstream = HttpUpstream::start(&[]);
    let mut s = session(&upstream.url).await;
    let call = || tool_params("test_tool_with_logging", json!({}));
    let level = |level| SetLevelRequestParams::new(level);

    s.client
        .set_level(level(LoggingLevel::Warning))
        .await
        .expect("setLevel");
    s.client.call_tool(call()).await.expect("first call");
    s.client
        .set_level(level(LoggingLevel::Debug))
        .await
        .expect("setLevel");
    s.client.call_tool(call()).await.expect("second call");
    for expected in ["started", "processing", "completed"] {
        let message = next(&mut s.logs, "log message").await;
        assert!(message.contains(expected), "{message} lacks {expected}");
    }
    assert!(
        s.logs.try_recv().is_err(),
        "more than the second call's three messages"
    );
}

/// A client that declares `roots` and answers `roots/list` with one root.
#[derive(Clone)]
struct WithRoots;

const ROOT: &str = "file:///srv/narrowgate-test-root";

impl ClientHandler for WithRoots {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_roots().build();
        ClientConfig::new(capabilities, Implementation::new("roots-test", "1"))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(vec![Root::new(ROOT)]))
    }
}

/// Proves `list_roots` sends `roots/list` to a caller that declared `roots` and returns its
/// answer, and refuses (a tool error, no request) a caller that did not.
#[tokio::test]
async fn list_roots_asks_the_caller() {
    let upstream = HttpUpstream::start(&[]);
    let with = WithRoots
        .serve(StreamableHttpClientTransport::from_uri(
            upstream.url.as_str(),
        ))
        .await
        .expect("connect");
    let call = || tool_params("list_roots", json!({}));
    let result = with.call_tool(call()).await.expect("list_roots");
    let roots = result.structured_content.expect("structured")["roots"].clone();
    assert_eq!(roots, json!([{"uri": ROOT}]));

    let without = session(&upstream.url).await;
    let result = without.client.call_tool(call()).await.expect("list_roots");
    assert_eq!(result.is_error, Some(true), "{result:?}");
}

/// Proves `echo_meta` returns the `_meta` keys the request carried, as they arrived.
#[tokio::test]
async fn echo_meta_returns_the_request_meta() {
    let upstream = HttpUpstream::start(&[]);
    let s = session(&upstream.url).await;
    let mut params: CallToolRequestParams = tool_params("echo_meta", json!({}));
    let meta = json!({"example.com/trace": "abc", "example.com/n": 7});
    params.meta = Some(serde_json::from_value(meta).expect("meta"));
    let result = s.client.call_tool(params).await.expect("echo_meta");
    let echoed = &result.structured_content.expect("structured")["meta"];
    assert_eq!(echoed["example.com/trace"], "abc", "{echoed}");
    assert_eq!(echoed["example.com/n"], 7, "{echoed}");
}
