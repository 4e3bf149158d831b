//! The core gateway against the repository's demo upstream, driven by rmcp's client and by raw
//! HTTP: narrowing, argument and result enforcement, callers, sessions and the HTTP guards.
//! Every test starts the real binary on its own port.

use crate::common;
#[path = "gateway/credentials.rs"]
mod credentials;
#[path = "gateway/direct.rs"]
mod direct;
#[path = "gateway/direct_switch.rs"]
mod direct_switch;
#[path = "gateway/forwarder_switch.rs"]
mod forwarder_switch;
#[path = "gateway/forwarding.rs"]
mod forwarding;
#[path = "gateway/modern.rs"]
mod modern;

use std::time::{Duration, Instant};

use common::{
    BOB, Gateway, HttpUpstream, KEY, Raw, call, call_ok, client, demo_stdio_config, retry_until,
    text_of, tool_names,
};
use rmcp::model::CallToolResult;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// alice may call every tool, bob only `echo`.
fn callers() -> String {
    common::callers(&[("bob", BOB, "[echo]")])
}

const WEATHER_IO: &str = r#"
    input:
      type: object
      properties:
        location: { type: string, enum: [Chicago, New York], description: "City name" }
      required: [location]
      additionalProperties: false
    output:
      type: object
      properties:
        temperature: { type: number, minimum: -60, maximum: 60 }
        conditions: { type: string, maxLength: 64 }
        humidity: { type: number }
      required: [temperature, conditions]
"#;

fn demo_contract() -> String {
    format!(
        r#"upstream: demo
tools:
  get_weather:
    upstream_tool: weather
    title: Weather
    description: Current weather for Chicago or New York.
    privilege: read
{WEATHER_IO}
  bad_weather:
    privilege: read
{WEATHER_IO}
  text_json:
    privilege: read
    input: {{ type: object, additionalProperties: false }}
    output:
      type: object
      properties: {{ temperature: {{ type: number }}, conditions: {{ type: string }} }}
      required: [temperature, conditions]
  echo:
    description: Echo a short message.
    privilege: read
    input:
      type: object
      properties: {{ message: {{ type: string, maxLength: 20 }} }}
      required: [message]
      additionalProperties: false
  counter:
    privilege: write
    input: {{ type: object, additionalProperties: false }}
  big:
    privilege: read
    input: {{ type: object, properties: {{ bytes: {{ type: integer }} }}, required: [bytes] }}
  fail:
    privilege: read
  slow:
    privilege: read
    timeout: 300ms
    input: {{ type: object, properties: {{ ms: {{ type: integer }} }}, required: [ms] }}
  crash:
    privilege: execute
  toggle_extra:
    privilege: write
  extra:
    privilege: read
  add_wider:
    upstream_tool: add
    privilege: read
    input:
      type: object
      properties: {{ a: {{ type: [number, string] }}, b: {{ type: number }} }}
      required: [a, b]
  paris_weather:
    upstream_tool: weather
    privilege: read
    input:
      type: object
      properties: {{ location: {{ type: string, enum: [Paris] }} }}
      required: [location]
  ghost:
    upstream_tool: does_not_exist
    privilege: read
  pinned_wrong:
    upstream_tool: echo
    privilege: read
    pin: sha256:0000000000000000000000000000000000000000000000000000000000000000
    input: {{ type: object, properties: {{ message: {{ type: string }} }} }}
"#
    )
}

const ORPHAN: &str = "upstream: nowhere\ntools:\n  orphan:\n    privilege: read\n";

fn start_demo(extra_config: &str) -> Gateway {
    let contract = demo_contract();
    Gateway::start(
        &demo_stdio_config(&callers(), extra_config),
        &[("demo.yaml", contract.as_str()), ("orphan.yaml", ORPHAN)],
    )
}

/// [`start_demo`], and alice connected to it.
async fn start_demo_for_alice(extra_config: &str) -> (Gateway, RunningService<RoleClient, ()>) {
    let gw = start_demo(extra_config);
    let alice = client(&gw.url, KEY).await;
    (gw, alice)
}

/// Calls `name` with `args`, asserting a tool error answered within `within`.
async fn tool_error_within(
    within: Duration,
    c: &RunningService<RoleClient, ()>,
    name: &str,
    args: Value,
) -> CallToolResult {
    let started = Instant::now();
    let r = call(c, name, args).await.expect("answered");
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let took = started.elapsed();
    assert!(took < within, "answered in {took:?}");
    r
}

/// Proves: tools/list publishes exactly the enabled contracts, with the contract's texts, schemas
/// and annotations (never the upstream's), filtered by the caller's globs.
#[tokio::test]
async fn tools_list_publishes_only_contracted_tools_per_caller() {
    let (gw, alice) = start_demo_for_alice("").await;
    let tools = alice.list_all_tools().await.expect("list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "add_wider",
            "bad_weather",
            "big",
            "counter",
            "crash",
            "echo",
            "fail",
            "get_weather",
            "slow",
            "text_json",
            "toggle_extra"
        ],
        "upstream-only tools (whoami, add, ...) and disabled contracts must be invisible"
    );
    let weather = tools
        .iter()
        .find(|t| t.name == "get_weather")
        .expect("get_weather listed");
    assert_eq!(
        weather
            .description
            .as_deref()
            .map(common::without_error_types),
        Some("Current weather for Chicago or New York.")
    );
    assert_eq!(weather.title.as_deref(), Some("Weather"));
    let input = Value::Object(weather.input_schema.as_ref().clone());
    assert_eq!(
        input["properties"]["location"]["enum"],
        json!(["Chicago", "New York"])
    );
    assert_eq!(input["properties"]["location"]["description"], "City name");
    assert_eq!(
        input["$schema"],
        json!("https://json-schema.org/draft/2020-12/schema"),
        "the upstream declared a dialect: the published schema names its own (2020-12), never draft-07"
    );
    let output = Value::Object(
        weather
            .output_schema
            .as_ref()
            .expect("outputSchema")
            .as_ref()
            .clone(),
    );
    assert_eq!(
        output["anyOf"][0]["properties"]["temperature"]["maximum"],
        60
    );
    let annotations = weather.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(true));
    assert_eq!(annotations.destructive_hint, Some(false));
    let crash = tools
        .iter()
        .find(|t| t.name == "crash")
        .expect("crash listed");
    assert_eq!(
        crash.annotations.as_ref().and_then(|a| a.destructive_hint),
        Some(true)
    );

    let bob = client(&gw.url, BOB).await;
    let bob_tools = tool_names(&bob).await;
    assert_eq!(bob_tools, ["echo"]);
}

/// Proves: in-contract calls reach the upstream and come back validated; a lone JSON text block
/// is lifted into structuredContent; an upstream tool error passes as a tool error.
#[tokio::test]
async fn calls_within_the_contract_pass_and_results_are_validated() {
    let (_gw, alice) = start_demo_for_alice("").await;
    let r = call_ok(&alice, "get_weather", json!({"location": "Chicago"})).await;
    let s = r.structured_content.expect("structuredContent");
    assert!(
        s["temperature"].is_number() && s["conditions"].is_string(),
        "{s}"
    );

    let r = call(&alice, "text_json", json!({})).await.expect("call");
    assert_eq!(
        r.structured_content,
        Some(json!({"temperature": 21, "conditions": "Clear"}))
    );

    let r = call(&alice, "fail", json!({})).await.expect("call");
    assert_eq!(r.is_error, Some(true));
    assert!(text_of(&r).contains("upstream failure: simulated"), "{r:?}");
}

/// Proves: out-of-contract arguments never reach the upstream (the upstream's own counter does
/// not move), and the tool error names path and rule without echoing the value.
#[tokio::test]
async fn out_of_contract_arguments_never_reach_the_upstream() {
    let (_gw, alice) = start_demo_for_alice("").await;
    let cases = [
        (
            "get_weather",
            json!({"location": "SECRET-PARIS"}),
            "/location",
            "enum",
        ),
        ("get_weather", json!({"location": 42}), "/location", "type"),
        ("get_weather", json!({}), "/", "required"),
        (
            "get_weather",
            json!({"location": "Chicago", "extra": "SECRET-PARIS"}),
            "/",
            "additionalProperties",
        ),
        (
            "echo",
            json!({"message": "SECRET-PARIS is far too long for this"}),
            "/message",
            "maxLength",
        ),
        ("counter", json!({"x": 1}), "/", "additionalProperties"),
    ];
    for (tool, args, path, rule) in cases {
        let r = call(&alice, tool, args.clone()).await.expect("answered");
        let text = text_of(&r);
        assert_eq!(r.is_error, Some(true), "{tool} {args}: {text}");
        assert!(
            text.contains(path) && text.contains(rule),
            "{tool} {args}: {text}"
        );
        assert!(
            !text.contains("SECRET-PARIS"),
            "the value must not be echoed: {text}"
        );
    }
    // The rejected counter call never ran: the first real call counts 1.
    let r = call(&alice, "counter", json!({})).await.expect("call");
    assert_eq!(
        r.structured_content,
        Some(json!({"count": 1})),
        "counter ran for a rejected call: {r:?}"
    );
}

/// Proves: on protocol 2025-06-18 an out-of-contract call is JSON-RPC -32602 with the same message.
#[tokio::test]
async fn older_protocols_get_invalid_params_for_rejected_arguments() {
    let gw = start_demo("");
    let reply = Raw::new(&gw.url)
        .call_in_new_session(
            KEY,
            "2025-06-18",
            "get_weather",
            json!({"location": "SECRET-PARIS"}),
        )
        .await;
    let error = &reply.message()["error"];
    assert_eq!(error["code"], -32602, "{reply:?}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("/location")
            && message.contains("enum")
            && !message.contains("SECRET-PARIS"),
        "{message}"
    );
}

/// Proves: a tool that is not the caller's, a disabled tool, an upstream tool without a contract
/// and a tool that does not exist all get the same -32602 `Unknown tool: NAME`.
#[tokio::test]
async fn unknown_and_forbidden_tools_get_the_same_answer() {
    let gw = start_demo("");
    let bob = client(&gw.url, BOB).await;
    let alice = client(&gw.url, KEY).await;
    for (who, name) in [
        (&bob, "get_weather"),
        (&bob, "nope"),
        (&alice, "ghost"),
        (&alice, "whoami"),
        (&alice, "nope"),
    ] {
        let e = call(who, name, json!({})).await.expect_err("refused");
        assert!(
            e.contains("-32602") && e.contains(&format!("Unknown tool: {name}")),
            "{name}: {e}"
        );
    }
    // Bob's own tool still works.
    let r = call(&bob, "echo", json!({"message": "hi"}))
        .await
        .expect("echo");
    assert!(text_of(&r).contains("hi"));
}

/// Proves: a result outside the contract becomes a tool error naming path and rule, carrying
/// none of the upstream's data; extra content blocks of a valid result are dropped too.
#[tokio::test]
async fn out_of_contract_results_never_reach_the_client() {
    let (_gw, alice) = start_demo_for_alice("").await;
    let r = call(&alice, "bad_weather", json!({"location": "Chicago"}))
        .await
        .expect("answered");
    let all = serde_json::to_string(&r).expect("json");
    assert_eq!(r.is_error, Some(true), "{all}");
    assert!(
        all.contains("/temperature") && all.contains("maximum"),
        "{all}"
    );
    assert!(
        !all.contains("UPSTREAM-SECRET-DATA") && !all.contains("999"),
        "{all}"
    );
    // Only the typed error object: none of the result.
    let error = &r.structured_content.as_ref().expect("typed")["error"];
    assert_eq!(error["type"], "invalid_result", "{all}");
}

/// Proves: results larger than max_result_bytes become a tool error; small ones pass.
#[tokio::test]
async fn max_result_bytes_is_enforced() {
    let (_gw, alice) = start_demo_for_alice("max_result_bytes: 2KiB\n").await;
    call_ok(&alice, "big", json!({"bytes": 100})).await;
    let r = call(&alice, "big", json!({"bytes": 5000}))
        .await
        .expect("call");
    assert_eq!(r.is_error, Some(true));
    assert!(text_of(&r).contains("max_result_bytes"), "{r:?}");
    assert!(!text_of(&r).contains("xxxx"));
}

/// Proves: the contract's timeout bounds a call, and the gateway keeps serving afterwards.
#[tokio::test]
async fn contract_timeout_bounds_a_slow_call() {
    let (_gw, alice) = start_demo_for_alice("").await;
    let r = tool_error_within(Duration::from_secs(3), &alice, "slow", json!({"ms": 5000})).await;
    assert!(text_of(&r).contains("did not answer within"), "{r:?}");
    call_ok(&alice, "slow", json!({"ms": 10})).await;
}

/// Proves: an upstream that dies mid-call answers a tool error at once (no hang), its tools answer
/// `unavailable` while it is down, and the supervisor brings it back.
#[tokio::test]
async fn a_dying_upstream_answers_at_once_and_is_restarted() {
    let (gw, alice) = start_demo_for_alice("").await;
    tool_error_within(Duration::from_secs(5), &alice, "crash", json!({})).await;
    let mut saw = Vec::new();
    let back = retry_until(
        &gw,
        Duration::from_secs(20),
        Duration::from_millis(50),
        "the upstream's restart",
        async || {
            let r = call(&alice, "echo", json!({"message": "back"}))
                .await
                .expect("answered");
            let text = text_of(&r);
            if r.is_error != Some(true) {
                return Ok(text);
            }
            assert!(
                text.contains("upstream demo unavailable") || text.contains("connection"),
                "{text}"
            );
            saw.push(text);
            Err(format!("saw {saw:?}"))
        },
    )
    .await;
    assert!(back.contains("back"), "{back}");
    // The restart waits at least 250 ms (the supervisor's first backoff), and calls were polled
    // every 50 ms: some of them met the upstream down.
    assert!(!saw.is_empty(), "no call saw the upstream down");
}

/// Proves: disabled tools carry their reason in /readyz (missing upstream, missing tool, empty
/// intersection, pin mismatch) and enabled ones their narrowing verdict.
#[tokio::test]
async fn readyz_reports_every_tool_and_why_it_is_disabled() {
    let gw = start_demo("");
    let r = gw.readyz();
    assert_eq!(r["ready"], true);
    assert_eq!(r["upstreams"]["demo"]["state"], "up");
    let tool = |name: &str| r["tools"][name].clone();
    assert_eq!(tool("get_weather")["state"], "enabled");
    assert_eq!(tool("get_weather")["narrowing"], "proven narrower");
    assert_eq!(tool("add_wider")["narrowing"], "wider at /properties/a");
    for (name, reason) in [
        ("orphan", "upstream `nowhere` is not configured"),
        ("ghost", "has no tool `does_not_exist`"),
        ("paris_weather", "admit no common arguments"),
        ("pinned_wrong", "pin mismatch"),
        ("extra", "has no tool `extra`"),
    ] {
        assert_eq!(tool(name)["state"], "disabled", "{name}: {r}");
        let text = tool(name)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(text.contains(reason), "{name}: {text}");
        assert!(
            gw.log().contains(name),
            "the reason for {name} is logged too"
        );
    }
}

/// Proves: where the contract is wider than the upstream, the upstream's schema still guards the
/// call at the gateway.
#[tokio::test]
async fn a_wider_contract_is_still_held_to_the_upstream_schema() {
    let (_gw, alice) = start_demo_for_alice("").await;
    let r = call(&alice, "add_wider", json!({"a": "SECRET-TEXT", "b": 1}))
        .await
        .expect("answered");
    let text = text_of(&r);
    assert_eq!(r.is_error, Some(true));
    assert!(
        text.contains("upstream tool's schema") && text.contains("/a"),
        "{text}"
    );
    assert!(!text.contains("SECRET-TEXT"));
    call_ok(&alice, "add_wider", json!({"a": 2, "b": 40})).await;
}

/// Proves: when the upstream's tool list changes, contracts are re-narrowed: a tool whose upstream
/// tool appears is enabled, and disabled again when it goes.
#[tokio::test]
async fn a_changed_upstream_tool_list_is_renarrowed() {
    let (gw, alice) = start_demo_for_alice("").await;
    assert_eq!(gw.readyz()["tools"]["extra"]["state"], "disabled");
    call(&alice, "toggle_extra", json!({}))
        .await
        .expect("toggle on");
    gw.wait_for(Duration::from_secs(10), "extra enabled", |r| {
        r["tools"]["extra"]["state"] == "enabled"
    });
    let names = tool_names(&alice).await;
    assert!(names.contains(&"extra".to_string()), "{names:?}");
    call_ok(&alice, "extra", json!({})).await;
    call(&alice, "toggle_extra", json!({}))
        .await
        .expect("toggle off");
    gw.wait_for(Duration::from_secs(10), "extra disabled", |r| {
        r["tools"]["extra"]["state"] == "disabled"
    });
    let e = call(&alice, "extra", json!({}))
        .await
        .expect_err("gone again");
    assert!(e.contains("Unknown tool: extra"), "{e}");
}

/// Proves: the HTTP guards answer clear errors (401, 403, 404, 413, 400) and the gateway keeps
/// serving afterwards.
#[tokio::test]
async fn http_guards_refuse_bad_requests_and_keep_serving() {
    let gw = start_demo("allowed_origins: [\"http://localhost:*\"]\n");
    let raw = Raw::new(&gw.url);
    let init = common::initialize_body("2025-11-25");
    let auth = format!("Bearer {KEY}");

    let no_key = raw.post(&[], &init).await;
    assert_eq!(no_key.status, 401);
    assert!(
        no_key
            .header("www-authenticate")
            .is_some_and(|h| h.starts_with("Bearer")),
        "{no_key:?}"
    );
    let bad_key = raw.post(&[("authorization", "Bearer wrong")], &init).await;
    assert_eq!(bad_key.status, 401);

    let foreign_host = raw
        .post(
            &[("authorization", &auth), ("host", "evil.example.com")],
            &init,
        )
        .await;
    assert_eq!(foreign_host.status, 403, "{foreign_host:?}");
    for (origin, status) in [
        ("http://evil.example.com", 403),
        ("http://localhost:6274", 200),
    ] {
        let reply = raw
            .post(&[("authorization", &auth), ("origin", origin)], &init)
            .await;
        assert_eq!(reply.status, status, "origin {origin}: {reply:?}");
    }

    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2 << 20)
    );
    let too_big = raw.post(&[("authorization", &auth)], &huge).await;
    assert_eq!(too_big.status, 413, "{}", too_big.body);

    let malformed = raw.post(&[("authorization", &auth)], "{not json").await;
    assert_eq!(malformed.status, 400, "{malformed:?}");
    assert_eq!(malformed.message()["error"]["code"], -32700);

    // A chunked body that breaks off in a bad chunk is the client's fault, not a size problem: 400.
    let broken = broken_chunked_post(&gw.url, &auth).await;
    assert!(
        broken.starts_with("HTTP/1.1 400") && broken.contains("could not be read"),
        "{broken}"
    );

    let session = raw.open_session(Some(KEY), "2025-11-25").await;
    let bad_version = raw
        .request(Some(KEY), &session, "1999-01-01", "tools/list", json!({}))
        .await;
    assert_eq!(bad_version.status, 400, "{bad_version:?}");
    let unknown = raw
        .request(
            Some(KEY),
            "no-such-session",
            "2025-11-25",
            "tools/list",
            json!({}),
        )
        .await;
    assert_eq!(unknown.status, 404, "{unknown:?}");
    let stolen = raw
        .request(Some(BOB), &session, "2025-11-25", "tools/list", json!({}))
        .await;
    assert_eq!(
        stolen.status, 404,
        "another caller must not use alice's session: {stolen:?}"
    );

    // Still serving, and alice's session still works.
    let ok = raw
        .request(Some(KEY), &session, "2025-11-25", "tools/list", json!({}))
        .await;
    assert_eq!(ok.status, 200);
    assert!(
        ok.message()["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{ok:?}"
    );
}

/// Proves: a client asking for an unknown protocol revision in `initialize` is answered with one
/// the gateway supports, never an unsupported one.
#[tokio::test]
async fn initialize_with_an_unknown_version_negotiates_a_supported_one() {
    let gw = start_demo("");
    let raw = Raw::new(&gw.url);
    let auth = format!("Bearer {KEY}");
    let init = common::initialize_body("1999-01-01");
    let reply = raw.post(&[("authorization", &auth)], &init).await;
    let message = reply.message();
    let version = message["result"]["protocolVersion"].as_str();
    assert!(
        version.is_some_and(|v| ["2025-03-26", "2025-06-18", "2025-11-25"].contains(&v)),
        "{message}"
    );
}

/// Proves: over an HTTP upstream, the gateway sends its own configured credential and never the
/// caller's API key.
#[tokio::test]
async fn the_callers_key_is_never_sent_upstream() {
    let upstream = HttpUpstream::start(&[]);
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n    headers: {{ Authorization: \"Bearer gateway-own-credential\" }}\n{}",
        upstream.url,
        callers()
    );
    let contract = "upstream: demo\ntools:\n  whoami:\n    privilege: read\n";
    let gw = Gateway::start(&config, &[("demo.yaml", contract)]);
    let alice = client(&gw.url, KEY).await;
    let r = call(&alice, "whoami", json!({})).await.expect("call");
    let text = text_of(&r);
    assert!(text.contains("gateway-own-credential"), "{text}");
    assert!(
        !text.contains(KEY),
        "the caller's key reached the upstream: {text}"
    );
}

/// Counts `notifications/tools/list_changed` received from the gateway.
struct ListChangedCounter(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for ListChangedCounter {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        let _ = self.0.send(());
    }
}

/// Proves: a connected client is told its tool list changed when an upstream's tools change
/// the published set (here: `extra` appears after `toggle_extra`).
#[tokio::test]
async fn connected_clients_are_told_when_their_tool_list_changes() {
    let gw = start_demo("");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(gw.url.as_str()).auth_header(KEY);
    let watcher = ListChangedCounter(tx)
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("client connects");
    let alice = client(&gw.url, KEY).await;
    call(&alice, "toggle_extra", json!({}))
        .await
        .expect("toggle on");
    tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("list_changed within 10 s")
        .expect("notification");
    let names = tool_names(&watcher).await;
    assert!(names.contains(&"extra".to_string()), "{names:?}");
}

/// Proves: when an HTTP upstream goes away its state turns `down` in /readyz and its tools answer
/// `upstream NAME unavailable` at once; when it comes back the gateway reconnects by itself.
#[tokio::test]
async fn an_http_upstream_that_goes_away_is_reported_down_and_reconnected() {
    let port = common::free_port();
    let upstream = HttpUpstream::start_at(port, &[]);
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}",
        upstream.url,
        callers()
    );
    let contract = demo_contract();
    let gw = Gateway::start(&config, &[("demo.yaml", contract.as_str())]);
    let alice = client(&gw.url, KEY).await;
    drop(upstream);
    gw.wait_for(Duration::from_secs(20), "upstream down", |r| {
        r["upstreams"]["demo"]["state"] == "down"
    });
    let r = tool_error_within(
        Duration::from_secs(1),
        &alice,
        "echo",
        json!({"message": "hi"}),
    )
    .await;
    assert!(text_of(&r).contains("upstream demo unavailable"), "{r:?}");
    let _back = HttpUpstream::start_at(port, &[]);
    gw.wait_for(Duration::from_secs(30), "upstream up again", |r| {
        r["upstreams"]["demo"]["state"] == "up"
    });
    let r = call(&alice, "echo", json!({"message": "again"}))
        .await
        .expect("answered");
    assert!(text_of(&r).contains("again"), "{r:?}");
}

/// POSTs a chunked body whose second chunk has no valid size line, and returns what the gateway
/// wrote back before closing the connection.
async fn broken_chunked_post(url: &str, auth: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("authority");
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: {auth}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Transfer-Encoding: chunked\r\n\r\n5\r\n{{\"jso\r\nzz\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .expect("the gateway answers and closes")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}
