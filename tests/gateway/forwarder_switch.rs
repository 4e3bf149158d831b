//! `forwarder: false` on an HTTP upstream sends its `tools/call`s through rmcp's client instead of
//! the gateway's own forwarder (src/upstream/forward.rs, with its HTTP/1.1 client and SSE reader).
//! The forwarder exists for speed only, so a client must not be able to tell which one carried its
//! call: every answer, and everything the client hears while a call runs (progress, logs, the
//! upstream's questions), must be the same either way, on every kind of HTTP upstream the
//! forwarder serves. `direct_switch.rs` is the same comparison for the inbound path.

#![allow(deprecated)] // logging: deprecated from 2026-07-28 (SEP-2577); 2025 sessions carry it

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientInfo, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation,
    LoggingMessageNotificationParam, ProgressNotificationParam, SamplingMessage,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::common::{
    self, Gateway, HttpUpstream, KEY, call_ok, client, contract_file, echo_tool, slow_tool,
    text_of, tool_params,
};
use super::forwarding::field;

/// Contract YAML: the demo's tools the script calls (`echo` takes a message of at most 20).
fn contract() -> String {
    let plain = [
        "add",
        "fail",
        "big",
        "whoami",
        "test_simple_text",
        "test_image_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_error_handling",
        "test_tool_with_logging",
        "test_tool_with_progress",
        "test_sampling",
        "test_elicitation",
    ]
    .map(|tool| format!("  {tool}: {{ privilege: read }}\n"));
    let mut entries = vec![
        echo_tool("echo", 20, ""),
        "  counter:\n    privilege: write\n    input: { type: object, additionalProperties: false }\n"
            .to_string(),
        slow_tool("slow", "write", ""),
    ];
    entries.extend(plain);
    let entries: Vec<&str> = entries.iter().map(String::as_str).collect();
    contract_file("demo", &entries)
}

/// The calls of the comparison: (what, tool, arguments).
fn script() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("a plain answer", "echo", json!({"message": "hello"})),
        (
            "arguments out of contract",
            "echo",
            json!({"message": "far longer than twenty characters"}),
        ),
        ("structured content", "add", json!({"a": 2, "b": 40})),
        ("a tool error", "fail", json!({})),
        ("a large answer", "big", json!({"bytes": 300_000})),
        ("a write, first", "counter", json!({})),
        ("a write, second", "counter", json!({})),
        ("a call past its timeout", "slow", json!({"ms": 2_000})),
        ("text", "test_simple_text", json!({})),
        ("an image", "test_image_content", json!({})),
        ("an embedded resource", "test_embedded_resource", json!({})),
        ("mixed content", "test_multiple_content_types", json!({})),
        ("the conformance error", "test_error_handling", json!({})),
        (
            "logs beside the answer",
            "test_tool_with_logging",
            json!({}),
        ),
        (
            "progress beside the answer",
            "test_tool_with_progress",
            json!({}),
        ),
        (
            "the upstream asks the client's model",
            "test_sampling",
            json!({"prompt": "What is 2+2?"}),
        ),
        (
            "the upstream asks the client's user",
            "test_elicitation",
            json!({"message": "Who are you?"}),
        ),
    ]
}

/// A client that answers the upstream's questions the same way every time and writes down every
/// notification it hears, in order.
#[derive(Clone, Default)]
struct Recorder {
    heard: Arc<Mutex<Vec<Value>>>,
}

impl Recorder {
    /// What was heard during the call just answered. The gateway's log messages reach the
    /// client on the session's standalone stream (rmcp's server sends every notification but
    /// progress there), while the answer comes on the call's own stream: no client can order
    /// the two, and a log sent just before the answer may be read just after it. So this waits
    /// until nothing new has been heard for 50 ms (at most 2 s) before taking them.
    async fn take_settled(&self) -> Vec<Value> {
        const QUIET: std::time::Duration = std::time::Duration::from_millis(50);
        let count = || self.heard.lock().expect("recorder lock").len();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut seen = count();
        loop {
            tokio::time::sleep(QUIET).await;
            let now = count();
            if now == seen || tokio::time::Instant::now() >= deadline {
                break;
            }
            seen = now;
        }
        std::mem::take(&mut *self.heard.lock().expect("recorder lock"))
    }

    fn hear(&self, what: Value) {
        self.heard.lock().expect("recorder lock").push(what);
    }
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientInfo {
        let mut capabilities = ClientCapabilities::default();
        capabilities.sampling = Some(Default::default());
        capabilities.elicitation = Some(Default::default());
        ClientInfo::new(capabilities, Implementation::new("forwarder-switch", "1"))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.hear(json!({"asked": "sampling", "messages": params.messages.len()}));
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("4"),
            "model-of-the-test".to_string(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.hear(json!({"asked": "elicitation", "request": request}));
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"username": "alice", "email": "alice@example.com"})))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // The token is the client's own (rmcp numbers them); what the upstream said is compared.
        self.hear(
            json!({"progress": params.progress, "total": params.total, "message": params.message}),
        );
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.hear(json!({"log": params.level, "data": params.data}));
    }
}

/// A gateway in front of `upstream` with the forwarder on or off.
fn gateway_for(upstream: &HttpUpstream, forwarder: bool) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n    forwarder: {forwarder}\n{}",
        upstream.url,
        common::callers(&[])
    );
    Gateway::start(&config, &[("demo.yaml", &contract())])
}

/// The script's answers through a gateway with the forwarder `on` or off, in front of a demo
/// upstream of its own started with `args` (its counter starts at zero for each).
async fn answers(args: &[&str], on: bool) -> Vec<(&'static str, Value)> {
    let upstream = HttpUpstream::start(args);
    let gw = gateway_for(&upstream, on);
    let plain = client(&gw.url, KEY).await;
    // Which path carried the call: the forwarder's JSON-RPC ids are `narrowgate-N`, rmcp's
    // numbers. Without this the comparison could compare one path with itself.
    let seen: Value =
        serde_json::from_str(&text_of(&call_ok(&plain, "whoami", json!({})).await)).expect("JSON");
    assert_eq!(
        field(&seen, ":id").starts_with("narrowgate-"),
        on,
        "{args:?}, forwarder {on}: the call went the other way: {seen}"
    );
    let recorder = Recorder::default();
    let config = StreamableHttpClientTransportConfig::with_uri(gw.url.clone()).auth_header(KEY);
    let c: RunningService<RoleClient, Recorder> = recorder
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("rmcp client connects through the gateway");
    c.set_level(rmcp::model::SetLevelRequestParams::new(
        rmcp::model::LoggingLevel::Debug,
    ))
    .await
    .expect("logging/setLevel");
    let mut out = Vec::new();
    for (what, tool, arguments) in script() {
        let answer = match c.call_tool(tool_params(tool, arguments)).await {
            Ok(result) => serde_json::to_value(result).expect("a result serialises"),
            Err(e) => json!({"error": e.to_string()}),
        };
        out.push((
            what,
            json!({"answer": answer, "heard": recorder.take_settled().await}),
        ));
    }
    let _ = c.cancel().await;
    out
}

/// Proves: for an upstream in a 2025-11-25 session, a stateless 2025-11-25 one and a 2026-07-28
/// one, every answer of the script (plain and structured results, tool errors, a refusal, a large
/// answer, a timeout, content of every kind) and everything the client heard meanwhile (logs,
/// progress, sampling and elicitation questions it answered) are the same whether the forwarder
/// or rmcp's client carried the calls, and the switch really changes the path (checked on the
/// JSON-RPC id the upstream saw).
#[tokio::test]
async fn the_forwarder_and_rmcps_client_answer_alike() {
    for (mode, args) in [
        ("session", &["--legacy"][..]),
        ("stateless", &["--stateless", "--legacy"][..]),
        ("2026-07-28", &[][..]),
    ] {
        let forwarded = answers(args, true).await;
        let by_rmcp = answers(args, false).await;
        assert!(
            forwarded.iter().any(|(_, seen)| seen["heard"]
                .as_array()
                .is_some_and(|heard| !heard.is_empty())),
            "{mode}: the client heard nothing beside any answer: {forwarded:?}"
        );
        let differing: Vec<String> = forwarded
            .iter()
            .zip(&by_rmcp)
            .filter(|(a, b)| a != b)
            .map(|((what, a), (_, b))| format!("{what}:\n  forwarder: {a}\n  rmcp:      {b}"))
            .collect();
        assert!(
            differing.is_empty(),
            "{mode}: the forwarder and rmcp's client answered differently:\n{}",
            differing.join("\n")
        );
    }
}
