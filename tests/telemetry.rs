//! Telemetry against real peers: traces exported over OTLP (gRPC and HTTP/protobuf)
//! to the `rotel` collector, which forwards them to this repository's sink (tests/otel/otlp_sink.py);
//! an instrumented Python SDK upstream (tests/otel/upstream.py) exporting its own SERVER spans;
//! `/metrics` parsed as Prometheus text; JSON logs carrying the trace id.
//!
//! Needs `.peers/otel` (rotel + opentelemetry-proto) and the OpenTelemetry SDK in `.peers/py2`;
//! a missing piece fails the test with the command that installs it.

use crate::common;
use crate::otel;

use std::time::{Duration, Instant};

use common::{
    BAD_WEATHER_TOOL, Gateway, KEY, Raw, callers, contract_file, demo_stdio_config, echo_tool,
    receipts_json, result_text,
};
use otel::prometheus::{Sample, parse_prometheus, value};
use otel::{Collector, PyUpstream, hex_id};
use serde_json::{Value, json};

/// The protocol revision of the sessions the tests open.
const VERSION: &str = "2025-11-25";

/// `tools/call` in `session` with `params` plus optional extra headers.
async fn call(raw: &Raw, session: &str, params: Value, headers: &[(&str, &str)]) -> Value {
    raw.with_headers(headers)
        .request(Some(KEY), session, VERSION, "tools/call", params)
        .await
        .message()
}

fn find<'a>(spans: &'a [Value], trace: &str, service: &str, kind: &str) -> Option<&'a Value> {
    spans.iter().find(|s| {
        s["trace_id"] == trace && s["resource"]["service.name"] == service && s["kind"] == kind
    })
}

const PY_CONTRACT: &str = r#"upstream: py
tools:
  add_numbers:
    upstream_tool: add
    description: Add two integers.
    privilege: read
    input:
      type: object
      properties: { a: { type: integer }, b: { type: integer } }
      required: [a, b]
      additionalProperties: false
  add_cached:
    upstream_tool: add
    privilege: read
    cache: 60s
    input:
      type: object
      properties: { a: { type: integer }, b: { type: integer } }
      required: [a, b]
      additionalProperties: false
"#;

/// A tool on an upstream nothing listens on, degraded when unavailable.
const GONE_CONTRACT: &str = "upstream: gone\ntools:\n  resting:\n    privilege: read\n    \
    on_error: {types: [unavailable], degrade: resting}\n";

/// The whole scenario, exported with `protocol` (`grpc` or `http/protobuf`).
async fn one_trace_from_client_to_upstream(protocol: &str) {
    let collector = Collector::start();
    let upstream = PyUpstream::start(&format!("{}/v1/traces", collector.http));
    let endpoint = match protocol {
        "grpc" => &collector.grpc,
        _ => &collector.http,
    };
    let service = format!("gw-{}", protocol.replace('/', "-"));
    let config = format!(
        "upstreams:\n  py:\n    url: {}\n  gone:\n    url: http://127.0.0.1:{}/mcp\n{}telemetry:\n  service_name: {service}\n  \
         otlp_endpoint: {endpoint}\n  otlp_protocol: {protocol}\n",
        upstream.url,
        common::free_port(),
        callers(&[])
    );
    let gw = Gateway::spawn(
        &config,
        &[("py.yaml", PY_CONTRACT), ("gone.yaml", GONE_CONTRACT)],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    gw.wait_ready(Duration::from_secs(60));
    let raw = Raw::new(&gw.url);
    let session = raw.open_session(Some(KEY), VERSION).await;

    // 1. The client's context in params._meta.
    let (trace, client_span) = (hex_id(32), hex_id(16));
    let traceparent = format!("00-{trace}-{client_span}-01");
    let reply = call(
        &raw,
        &session,
        json!({"name": "add_numbers", "arguments": {"a": 2, "b": 3},
               "_meta": {"traceparent": traceparent, "tracestate": "test=1"}}),
        &[],
    )
    .await;
    assert_eq!(result_text(&reply["result"]), "5", "{reply}");
    collector
        .export_client_span(&trace, &client_span, "tools/call add_numbers")
        .await;
    // 2. Only the HTTP header: the fallback.
    let (header_trace, header_span) = (hex_id(32), hex_id(16));
    let header = format!("00-{header_trace}-{header_span}-01");
    let reply = call(
        &raw,
        &session,
        json!({"name": "add_numbers", "arguments": {"a": 1, "b": 1}}),
        &[("traceparent", &header)],
    )
    .await;
    assert_eq!(result_text(&reply["result"]), "2", "{reply}");
    // 3. A denied call: a JSON-RPC error.
    let (denied_trace, denied_span) = (hex_id(32), hex_id(16));
    let reply = call(
        &raw,
        &session,
        json!({"name": "nope", "arguments": {},
               "_meta": {"traceparent": format!("00-{denied_trace}-{denied_span}-01")}}),
        &[],
    )
    .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    // 4. A cached answer (the second identical call) and a degraded one.
    let traced = |name: &str| {
        let (trace, span) = (hex_id(32), hex_id(16));
        let params = json!({"name": name, "arguments": if name == "resting" { json!({}) } else { json!({"a": 4, "b": 4}) },
            "_meta": {"traceparent": format!("00-{trace}-{span}-01")}});
        (trace, params)
    };
    let (_, first_cached) = traced("add_cached");
    call(&raw, &session, first_cached, &[]).await;
    let (cached_trace, cached) = traced("add_cached");
    let reply = call(&raw, &session, cached, &[]).await;
    assert_eq!(
        reply["result"]["_meta"]["narrowgate/cached"], true,
        "{reply}"
    );
    let (degraded_trace, degraded) = traced("resting");
    let reply = call(&raw, &session, degraded, &[]).await;
    assert_eq!(result_text(&reply["result"]), "resting", "{reply}");

    let spans = collector
        .wait_for("the four spans of the call and the two others", |spans| {
            find(spans, &trace, "py-upstream", "SPAN_KIND_SERVER").is_some()
                && find(spans, &trace, &service, "SPAN_KIND_CLIENT").is_some()
                && find(spans, &trace, "test-client", "SPAN_KIND_CLIENT").is_some()
                && find(spans, &header_trace, "py-upstream", "SPAN_KIND_SERVER").is_some()
                && find(spans, &denied_trace, &service, "SPAN_KIND_SERVER").is_some()
                && find(spans, &cached_trace, &service, "SPAN_KIND_SERVER").is_some()
                && find(spans, &degraded_trace, &service, "SPAN_KIND_SERVER").is_some()
        })
        .await;
    // The cache hit and the recovery taken are on the SERVER spans, as in the receipts.
    let cached = find(&spans, &cached_trace, &service, "SPAN_KIND_SERVER").expect("cached");
    assert_eq!(
        cached["attributes"]["narrowgate.cached"], true,
        "{cached:#}"
    );
    let degraded = find(&spans, &degraded_trace, &service, "SPAN_KIND_SERVER").expect("degraded");
    assert_eq!(
        degraded["attributes"]["narrowgate.fallback"], "degrade",
        "{degraded:#}"
    );
    assert_eq!(
        degraded["attributes"]["narrowgate.error.type"], "unavailable",
        "{degraded:#}"
    );
    let in_trace: Vec<&Value> = spans.iter().filter(|s| s["trace_id"] == trace).collect();
    assert_eq!(
        in_trace.len(),
        4,
        "client, gateway SERVER, gateway CLIENT, upstream SERVER: {in_trace:#?}"
    );
    let client = find(&spans, &trace, "test-client", "SPAN_KIND_CLIENT").expect("client span");
    let server = find(&spans, &trace, &service, "SPAN_KIND_SERVER").expect("gateway SERVER");
    let outgoing = find(&spans, &trace, &service, "SPAN_KIND_CLIENT").expect("gateway CLIENT");
    let upstream_span =
        find(&spans, &trace, "py-upstream", "SPAN_KIND_SERVER").expect("upstream SERVER");
    // The tree: client → gateway SERVER → gateway CLIENT → upstream SERVER.
    assert_eq!(client["parent_span_id"], "", "{client:#}");
    assert_eq!(server["parent_span_id"], client_span, "{server:#}");
    assert_eq!(
        outgoing["parent_span_id"], server["span_id"],
        "{outgoing:#}"
    );
    assert_eq!(
        upstream_span["parent_span_id"], outgoing["span_id"],
        "{upstream_span:#}"
    );

    assert_eq!(server["name"], "tools/call add_numbers");
    let attributes = &server["attributes"];
    for (key, value) in [
        ("mcp.method.name", json!("tools/call")),
        ("gen_ai.tool.name", json!("add_numbers")),
        ("gen_ai.operation.name", json!("execute_tool")),
        ("mcp.session.id", json!(session)),
        ("mcp.protocol.version", json!(VERSION)),
        ("jsonrpc.request.id", json!("7")),
        ("narrowgate.caller", json!("alice")),
        ("narrowgate.outcome", json!("ok")),
    ] {
        assert_eq!(attributes[key], value, "{key} of {server:#}");
    }
    assert!(attributes.get("error.type").is_none(), "{server:#}");
    assert_eq!(server["status"]["code"], "STATUS_CODE_UNSET");
    assert_eq!(server["scope"], "narrowgate");

    assert_eq!(
        outgoing["name"], "tools/call add",
        "the upstream's tool name"
    );
    let attributes = &outgoing["attributes"];
    assert_eq!(attributes["mcp.method.name"], "tools/call");
    assert_eq!(attributes["gen_ai.tool.name"], "add");
    assert_eq!(attributes["narrowgate.upstream"], "py");
    assert_eq!(attributes["server.address"], "127.0.0.1");
    assert!(
        attributes["server.port"].as_u64().is_some_and(|p| p > 0),
        "{outgoing:#}"
    );
    assert_eq!(attributes["narrowgate.attempt"], 1, "{outgoing:#}");
    assert_eq!(upstream_span["name"], "tools/call add");
    assert_eq!(upstream_span["attributes"]["gen_ai.tool.name"], "add");

    // The header's context is continued when _meta has none.
    let header_server =
        find(&spans, &header_trace, &service, "SPAN_KIND_SERVER").expect("header SERVER");
    assert_eq!(header_server["parent_span_id"], header_span);
    let header_upstream =
        find(&spans, &header_trace, "py-upstream", "SPAN_KIND_SERVER").expect("header upstream");
    assert_ne!(header_upstream["parent_span_id"], "");

    // A refused call: error.type is the JSON-RPC code, the status ERROR.
    let denied = find(&spans, &denied_trace, &service, "SPAN_KIND_SERVER").expect("denied");
    // An unknown tool's name (the client's text) stays out of span names and tool attributes.
    assert_eq!(denied["name"], "tools/call");
    assert!(
        denied["attributes"].get("gen_ai.tool.name").is_none(),
        "{denied:#}"
    );
    assert_eq!(denied["parent_span_id"], denied_span);
    assert_eq!(denied["attributes"]["error.type"], "-32602", "{denied:#}");
    assert_eq!(denied["attributes"]["narrowgate.outcome"], "denied");
    // The typed error the receipt records is on the span too.
    assert_eq!(
        denied["attributes"]["narrowgate.error.type"], "denied",
        "{denied:#}"
    );
    assert_eq!(denied["status"]["code"], "STATUS_CODE_ERROR");
    assert!(
        !spans
            .iter()
            .any(|s| s["trace_id"] == denied_trace && s["kind"] == "SPAN_KIND_CLIENT"),
        "a denied call never reaches the upstream"
    );

    // The receipts name the traces, and so do the log lines of those calls.
    let receipts = receipts_json(&gw.config_path(), &[]);
    let traces: Vec<&str> = receipts
        .iter()
        .map(|r| r["trace_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        traces[..3],
        [&trace, &header_trace, &denied_trace],
        "{receipts:#?}"
    );
    assert_eq!(
        traces[4..],
        [&cached_trace, &degraded_trace],
        "{receipts:#?}"
    );
    let log = gw.log();
    assert!(
        log.lines()
            .any(|l| l.contains(&format!("trace_id={trace}")) && l.contains("tools/call")),
        "no log line of the call names its trace:\n{log}"
    );
}

/// Proves: with `otlp_protocol: grpc`, a call whose client context is in `params._meta` yields one
/// trace, client → gateway SERVER → gateway CLIENT → Python SDK upstream SERVER, with correct
/// parents, through the rotel collector; the SERVER span has the MCP semconv attributes plus
/// caller and outcome; the HTTP `traceparent` header is the fallback; a denied call's span has
/// `error.type=-32602` and status ERROR; receipts and log lines carry the trace ids.
#[tokio::test]
async fn one_trace_from_client_to_upstream_over_grpc() {
    one_trace_from_client_to_upstream("grpc").await;
}

/// Proves: the same with `otlp_protocol: http/protobuf` (the exporter appends `/v1/traces`).
#[tokio::test]
async fn one_trace_from_client_to_upstream_over_http_protobuf() {
    one_trace_from_client_to_upstream("http/protobuf").await;
}

const LIMITED_TOOL: &str = r#"  limited:
    upstream_tool: echo
    privilege: read
    rate: 1/m
    input:
      type: object
      properties: { message: { type: string } }
      required: [message]
"#;

/// echo, limited (echo at 1 call a minute) and bad_weather.
fn demo_contract() -> String {
    contract_file(
        "demo",
        &[&echo_tool("echo", 20, ""), LIMITED_TOOL, BAD_WEATHER_TOOL],
    )
}

fn demo_config(extra: &str) -> String {
    demo_stdio_config(&callers(&[]), extra)
}

/// Proves: with `telemetry.metrics: true` (and no exporter), `/metrics` is valid OpenMetrics text,
/// labelled so to a scraper that asks for it (as Prometheus does) and as 0.0.4 to others, whose `mcp_server_operation_duration_seconds` histogram counts every request by method, tool
/// and outcome (cumulative buckets, `+Inf` = count), `narrowgate_rejections_total` counts one call
/// of each refusal (denied, rejected_input, rejected_output, rate_limited), and
/// `narrowgate_upstream_up` says the upstream is up.
#[tokio::test]
async fn metrics_count_the_calls_made() {
    let gw = Gateway::start(
        &demo_config("telemetry:\n  metrics: true\n"),
        &[("demo.yaml", demo_contract().as_str())],
    );
    let raw = Raw::new(&gw.url);
    let session = raw.open_session(Some(KEY), VERSION).await;
    let calls = [
        (
            json!({"name": "echo", "arguments": {"message": "a"}}),
            false,
        ),
        (
            json!({"name": "echo", "arguments": {"message": "b"}}),
            false,
        ),
        (
            json!({"name": "echo", "arguments": {"message": "c"}}),
            false,
        ),
        (
            json!({"name": "echo", "arguments": {"message": "far too long for the contract"}}),
            true,
        ),
        (json!({"name": "nope", "arguments": {}}), true),
        (
            json!({"name": "bad_weather", "arguments": {"location": "Chicago"}}),
            true,
        ),
        (
            json!({"name": "limited", "arguments": {"message": "first"}}),
            false,
        ),
        (
            json!({"name": "limited", "arguments": {"message": "second"}}),
            true,
        ),
    ];
    for (params, refused) in &calls {
        let reply = call(&raw, &session, params.clone(), &[]).await;
        let is_refused = reply.get("error").is_some() || reply["result"]["isError"] == true;
        assert_eq!(is_refused, *refused, "{params}: {reply}");
    }
    raw.request(Some(KEY), &session, VERSION, "tools/list", json!({}))
        .await;

    // Prometheus asks for OpenMetrics first; a scraper that does not is answered as 0.0.4.
    let scrape = |accept: Option<&'static str>| {
        let mut request = reqwest::Client::new().get(format!("{}/metrics", gw.base));
        if let Some(accept) = accept {
            request = request.header("accept", accept);
        }
        async move {
            let response = request.send().await.expect("/metrics answers");
            assert_eq!(response.status(), 200);
            let content_type = response.headers()["content-type"]
                .to_str()
                .unwrap_or_default()
                .to_string();
            (content_type, response.text().await.expect("body"))
        }
    };
    let (plain, _) = scrape(None).await;
    assert!(plain.starts_with("text/plain; version=0.0.4"), "{plain}");
    let prometheus_accept = "application/openmetrics-text;version=1.0.0;q=0.5,\
                             text/plain;version=0.0.4;q=0.3,*/*;q=0.1";
    let (content_type, text) = scrape(Some(prometheus_accept)).await;
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    let samples = parse_prometheus(&text);

    let histogram = "mcp_server_operation_duration_seconds";
    let count = |labels: &[(&str, &str)]| value(&samples, &format!("{histogram}_count"), labels);
    let call = [("mcp_method_name", "tools/call")];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        call.iter().chain(extra).copied().collect()
    };
    assert_eq!(
        count(&with(&[("gen_ai_tool_name", "echo"), ("outcome", "ok")])),
        3.0,
        "{text}"
    );
    assert_eq!(
        count(&with(&[
            ("gen_ai_tool_name", "echo"),
            ("outcome", "rejected_input"),
            ("error_type", "tool_error")
        ])),
        1.0
    );
    assert_eq!(
        count(&with(&[("outcome", "denied"), ("error_type", "-32602")])),
        1.0
    );
    assert_eq!(
        count(&with(&[
            ("gen_ai_tool_name", "bad_weather"),
            ("outcome", "rejected_output")
        ])),
        1.0
    );
    assert_eq!(
        count(&with(&[("gen_ai_tool_name", "limited"), ("outcome", "ok")])),
        1.0
    );
    assert_eq!(
        count(&with(&[
            ("gen_ai_tool_name", "limited"),
            ("outcome", "rate_limited")
        ])),
        1.0
    );
    let all_calls: f64 = samples
        .iter()
        .filter(|s| {
            s.name == format!("{histogram}_count") && s.labels["mcp_method_name"] == "tools/call"
        })
        .map(|s| s.value)
        .sum();
    assert_eq!(all_calls, calls.len() as f64, "every call is counted once");
    assert_eq!(
        count(&[("mcp_method_name", "tools/list"), ("outcome", "ok")]),
        1.0
    );
    assert_eq!(count(&[("mcp_method_name", "initialize")]), 1.0);
    assert!(
        !text.contains("nope"),
        "an unknown tool name never becomes a label value"
    );
    // Buckets are cumulative and end at the count; the sum is plausible.
    for series in samples
        .iter()
        .filter(|s| s.name == format!("{histogram}_count"))
    {
        let same = |s: &&Sample| {
            s.name == format!("{histogram}_bucket")
                && series
                    .labels
                    .iter()
                    .all(|(k, v)| s.labels.get(k) == Some(v))
        };
        let buckets: Vec<&Sample> = samples.iter().filter(same).collect();
        assert_eq!(buckets.len(), 15, "14 bounds and +Inf: {buckets:#?}");
        assert!(
            buckets.windows(2).all(|w| w[0].value <= w[1].value),
            "{buckets:#?}"
        );
        assert_eq!(buckets[14].labels["le"], "+Inf");
        assert_eq!(buckets[14].value, series.value);
        let sum = value(
            &samples,
            &format!("{histogram}_sum"),
            &series
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
        );
        assert!(sum >= 0.0 && sum < 30.0 * series.value, "sum {sum}");
    }
    for outcome in [
        "denied",
        "rejected_input",
        "rejected_output",
        "rate_limited",
    ] {
        assert_eq!(
            value(
                &samples,
                "narrowgate_rejections_total",
                &[("outcome", outcome)]
            ),
            1.0,
            "{outcome}"
        );
    }
    assert_eq!(
        value(&samples, "narrowgate_upstream_up", &[("upstream", "demo")]),
        1.0
    );
    assert!(
        value(
            &samples,
            "narrowgate_upstream_tools",
            &[("upstream", "demo")]
        ) >= 3.0
    );
}

/// Proves: with `NARROWGATE_LOG_FORMAT=json` every log line is a JSON object; the line of a call
/// names its trace (the client's from `_meta`, else a fresh id), the same as its receipt's, also
/// with no exporter configured; an argument value is never logged; `/metrics` is 404 without
/// `telemetry.metrics: true`.
#[tokio::test]
async fn json_logs_carry_the_trace_id_and_no_argument() {
    let gw = Gateway::spawn(
        &demo_config(""),
        &[("demo.yaml", demo_contract().as_str())],
        &[("NARROWGATE_LOG_FORMAT", "json")],
    );
    gw.wait_ready(Duration::from_secs(60));
    let raw = Raw::new(&gw.url);
    let session = raw.open_session(Some(KEY), VERSION).await;
    let (trace, span) = (hex_id(32), hex_id(16));
    let marker = format!("M{}", hex_id(12));
    call(
        &raw,
        &session,
        json!({"name": "echo", "arguments": {"message": marker},
               "_meta": {"traceparent": format!("00-{trace}-{span}-01")}}),
        &[],
    )
    .await;
    call(
        &raw,
        &session,
        json!({"name": "echo", "arguments": {"message": "plain"}}),
        &[],
    )
    .await;
    let metrics = reqwest::get(format!("{}/metrics", gw.base))
        .await
        .expect("/metrics answers");
    assert_eq!(metrics.status(), 404);

    let receipts = receipts_json(&gw.config_path(), &[]);
    assert_eq!(receipts.len(), 2, "{receipts:#?}");
    assert_eq!(receipts[0]["trace_id"], trace);
    let fresh = receipts[1]["trace_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        fresh.len() == 32 && fresh.chars().all(|c| c.is_ascii_hexdigit()) && fresh != trace,
        "a call without context gets its own trace id: {fresh:?}"
    );
    // The receipt is written before the answer, the log line right after it: wait for both lines.
    let log = gw.wait_for_log(Duration::from_secs(10), "both calls' log lines", |log| {
        let is_call =
            |l: &str| serde_json::from_str::<Value>(l).is_ok_and(|l| l["message"] == "tools/call");
        log.lines().filter(|l| is_call(l)).count() >= 2
    });
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let call_lines: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "tools/call")
        .collect();
    assert_eq!(call_lines.len(), 2, "{log}");
    assert_eq!(call_lines[0]["span"]["trace_id"], trace, "{log}");
    assert_eq!(call_lines[1]["span"]["trace_id"], fresh, "{log}");
    assert_eq!(call_lines[0]["outcome"], "ok");
    assert!(
        !log.contains(&marker),
        "an argument value was logged:\n{log}"
    );
}

/// Not a check but a measurement (`--ignored --nocapture`): the mean time per sequential call
/// with telemetry off, with metrics, and with every span exported over gRPC to rotel (receipts on
/// tmpfs, so their writes do not drown the difference).
#[tokio::test]
#[ignore = "benchmark: run with --ignored --nocapture"]
async fn telemetry_cost_per_call() {
    let collector = Collector::start();
    let shm = tempfile::tempdir_in("/dev/shm").expect("tempdir in /dev/shm");
    let cases = [
        ("off", String::new()),
        ("metrics", "telemetry:\n  metrics: true\n".to_string()),
        (
            "metrics + gRPC export",
            format!(
                "telemetry:\n  metrics: true\n  otlp_endpoint: {}\n",
                collector.grpc
            ),
        ),
    ];
    const N: usize = 2000;
    for round in 0..3 {
        for (i, (label, telemetry)) in cases.iter().enumerate() {
            let receipts = format!(
                "receipts:\n  path: {}/r{round}-{i}.db\n",
                shm.path().display()
            );
            let gw = Gateway::start(
                &demo_config(&format!("{telemetry}{receipts}")),
                &[("demo.yaml", demo_contract().as_str())],
            );
            let raw = Raw::new(&gw.url);
            let session = raw.open_session(Some(KEY), VERSION).await;
            let params = json!({"name": "echo", "arguments": {"message": "hi"},
                "_meta": {"traceparent": format!("00-{}-{}-01", hex_id(32), hex_id(16))}});
            for _ in 0..200 {
                call(&raw, &session, params.clone(), &[]).await;
            }
            let started = Instant::now();
            for _ in 0..N {
                call(&raw, &session, params.clone(), &[]).await;
            }
            let per_call = started.elapsed().as_secs_f64() * 1e6 / N as f64;
            eprintln!("round {round}, telemetry {label}: {per_call:.0} µs/call over {N} calls");
        }
    }
}
