//! Talking MCP to the gateway with rmcp's own client, as a conforming client would: connect with
//! an API key, list tools, call them, and read the demo upstream's counters through it.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::config::KEY;
use super::raw::result_text;
use super::wait::{POLL_EVERY, judged, wait_until_async};

/// An rmcp client connected through the gateway at `url` with the API key `key`.
pub async fn client(url: &str, key: &str) -> RunningService<RoleClient, ()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("rmcp client connects through the gateway")
}

/// The names of the tools the gateway lists to `c` (every page of tools/list).
pub async fn tool_names<S: rmcp::service::Service<RoleClient>>(
    c: &RunningService<RoleClient, S>,
) -> Vec<String> {
    let tools = c.list_all_tools().await.expect("tools/list");
    tools.iter().map(|t| t.name.to_string()).collect()
}

/// `tools/call` parameters: `name` with `args` (a JSON object) as its arguments.
pub fn tool_params(name: &str, args: Value) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_string());
    params.arguments = args.as_object().cloned();
    params
}

/// Calls tool `name` with `args`: its result, or the JSON-RPC error as text.
pub async fn call(
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> Result<CallToolResult, String> {
    c.call_tool(tool_params(name, args))
        .await
        .map_err(|e| e.to_string())
}

/// Like [`call`], for calls the gateway must answer with a result (a tool error included).
pub async fn call_answered(
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> CallToolResult {
    call(c, name, args).await.expect("the gateway answers")
}

/// Like [`call`], asserting that the gateway answers a result that is not a tool error.
pub async fn call_ok(
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let r = call_answered(c, name, args).await;
    assert_ne!(r.is_error, Some(true), "{name}: {r:?}");
    r
}

/// The `outputSchema` the gateway publishes for a contract's `output`: the schema, or the typed
/// error object (docs/semantics.md, "Typed errors").
pub fn published_output(output: &Value) -> Value {
    match output.as_object() {
        Some(map) => Value::Object(narrowgate::harness::published_output(map)),
        None => output.clone(),
    }
}

/// A published description without its last line, `Errors: …` (the types the tool can answer).
pub fn without_error_types(description: &str) -> &str {
    match description.rsplit_once("\n\nErrors: ") {
        Some((text, _)) => text,
        None => description
            .strip_prefix("Errors: ")
            .map_or(description, |_| ""),
    }
}

/// Text of every text block of a result, joined.
pub fn text_of(r: &CallToolResult) -> String {
    result_text(&serde_json::to_value(r).expect("result serializes"))
}

/// The whole number at `field` of a result's structuredContent, if there is one.
pub fn structured_u64(r: &CallToolResult, field: &str) -> Option<u64> {
    r.structured_content
        .as_ref()
        .and_then(|s| s.get(field))
        .and_then(Value::as_u64)
}

/// The demo upstream's counters, through a contract for its `peek_counter` tool (without
/// `dedupe`, so the call always reaches the upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamCounts {
    /// How many times its `counter` tool has run.
    pub count: u64,
    /// How many `slow` calls its clients cancelled.
    pub cancelled: u64,
    /// How many `counter` and `slow` calls are running now.
    pub running: u64,
}

/// Reads [`UpstreamCounts`] with one `peek_counter` call.
pub async fn upstream_counts(c: &RunningService<RoleClient, ()>) -> UpstreamCounts {
    let r = call_answered(c, "peek_counter", json!({})).await;
    let field = |name| {
        structured_u64(&r, name).unwrap_or_else(|| panic!("peek_counter answers {name}: {r:?}"))
    };
    UpstreamCounts {
        count: field("count"),
        cancelled: field("cancelled"),
        running: field("running"),
    }
}

/// The demo upstream's counter, through a contract for its `peek_counter` tool (without `dedupe`,
/// so the call always reaches the upstream).
pub async fn counter(c: &RunningService<RoleClient, ()>) -> u64 {
    upstream_counts(c).await.count
}

/// Polls `peek_counter` until `predicate` holds for the upstream's counts (a call under way,
/// every call finished, ...) and returns them; panics after `within` saying `what` never
/// happened.
pub async fn wait_for_counts(
    c: &RunningService<RoleClient, ()>,
    within: Duration,
    what: &str,
    predicate: impl Fn(&UpstreamCounts) -> bool,
) -> UpstreamCounts {
    let check = async || judged(upstream_counts(c).await, &predicate, |c| format!("{c:?}"));
    wait_until_async(within, POLL_EVERY, what, String::new, check).await
}

/// Makes the same call at the same time through each of `urls`, each from a client of its own
/// (as [`KEY`]); the answers in the order of `urls`.
pub async fn concurrent_calls(urls: &[&str], name: &str, args: Value) -> Vec<CallToolResult> {
    let tasks: Vec<_> = urls
        .iter()
        .map(|url| {
            let (url, name, args) = (url.to_string(), name.to_string(), args.clone());
            tokio::spawn(async move {
                let c = client(&url, KEY).await;
                call_answered(&c, &name, args).await
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("task"));
    }
    results
}

/// Asserts that the first of `results` has structuredContent and every other the same.
pub fn assert_same_structured_content(results: &[CallToolResult]) {
    let first = results[0].structured_content.clone();
    assert!(first.is_some(), "{:?}", results[0]);
    assert!(
        results.iter().all(|r| r.structured_content == first),
        "{results:?}"
    );
}

/// An rmcp client handler that passes on every `notifications/resources/updated` it hears.
pub struct Updates(pub tokio::sync::mpsc::UnboundedSender<String>);

impl rmcp::ClientHandler for Updates {
    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

/// A session through the gateway at `url` with key `key`, and the URIs of the updates it hears.
pub async fn listening(
    url: &str,
    key: &str,
) -> (
    RunningService<RoleClient, Updates>,
    tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    let (send, receive) = tokio::sync::mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
    let client = Updates(send)
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("client connects through the gateway");
    (client, receive)
}
