//! Typed errors, fallbacks and the result cache (docs/semantics.md) as real clients meet them:
//! the official TypeScript SDK (which checks an error's `structuredContent` against the tool's
//! published `outputSchema` too) and the Python SDK 2.x, through the gateway in front of the MCP
//! project's `mcp-server-time` (stdio). Each refusal and failure is read by its type, never by
//! its English; receipts record the type, the fallback taken and cache hits.

use crate::common;

use common::peers::{PyClient, mcp_server_time, ts_client};
use common::receipts::receipts_json;
use common::{Gateway, KEY, callers};
use serde_json::{Value, json};

/// `mcp-server-time`'s `get_current_time` under several contracts, each showing one kind of
/// failure; `down` is an upstream nothing listens on.
fn time_gateway() -> Gateway {
    let closed = common::free_port();
    let config = format!(
        "upstreams:\n  time:\n    command: {}\n    args: [--local-timezone, UTC]\n  \
         down:\n    url: http://127.0.0.1:{closed}/mcp\n{}",
        mcp_server_time().display(),
        callers(&[])
    );
    let input = json!({"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 40}},
        "required": ["timezone"], "additionalProperties": false});
    let output = json!({"type": "object", "properties": {
        "timezone": {"type": "string"}, "datetime": {"type": "string"},
        "day_of_week": {"type": "string"}, "is_dst": {"type": "boolean"}},
        "required": ["timezone", "datetime"]});
    let tool = |extra: &str| {
        format!(
            "    upstream_tool: get_current_time\n    privilege: read\n    idempotent: true\n    \
             input: {input}\n    output: {output}\n{extra}"
        )
    };
    let time = format!(
        "upstream: time\ntools:\n  now:\n{}  now_limited:\n{}  now_guarded:\n{}  now_cached:\n{}",
        tool(
            "    errors:\n      unknown_timezone: {match: \"(?i)invalid timezone\", retry: false}\n"
        ),
        tool("    rate: 1/m burst 1\n"),
        tool(
            "    when:\n      - expr: \"args.timezone != 'Europe/Paris'\"\n        message: Paris is not served here\n"
        ),
        tool("    cache: 60s\n"),
    );
    let down = format!(
        "upstream: down\ntools:\n  now_mirrored:\n{}  now_degraded:\n{}",
        tool("    on_error: {types: [unavailable, timeout], fallback: now}\n"),
        tool("    on_error: {types: [unavailable], degrade: \"the clock is resting\"}\n"),
    );
    let gw = Gateway::start(&config, &[("time.yaml", &time), ("down.yaml", &down)]);
    gw.wait_tools_joined("time", &["now", "now_limited", "now_guarded", "now_cached"]);
    gw
}

/// The steps both SDKs run, in order; [`assert_typed`] reads their results.
fn steps() -> Value {
    let call = |name: &str, timezone: &str| json!({"op": "call", "name": name, "arguments": {"timezone": timezone}});
    json!([
        {"op": "list"},
        call("now", "UTC"),
        call("now", "Mars/Olympus"),
        json!({"op": "call", "name": "now", "arguments": {"timezone": "UTC", "extra": 1}}),
        call("now_limited", "UTC"),
        call("now_limited", "UTC"),
        call("now_guarded", "Europe/Paris"),
        call("now_mirrored", "UTC"),
        call("now_degraded", "UTC"),
        call("now_cached", "Asia/Tokyo"),
        call("now_cached", "Asia/Tokyo"),
    ])
}

/// The error object of a step's result (a tool error), or a panic naming the step.
fn error_of(results: &Value, i: usize) -> &Value {
    let r = &results[i];
    assert_eq!(r["is_error"], true, "step {i}: {r}");
    &r["structured_content"]["error"]
}

/// Asserts what every SDK must read from [`steps`]: each failure by its type.
fn assert_typed(out: &Value, sdk: &str) {
    let r = &out["results"];
    let listed = r[0]["tools"].as_array().expect("tools");
    let now = listed
        .iter()
        .find(|t| t["name"] == "now")
        .expect("now listed");
    let description = now["description"].as_str().unwrap_or_default();
    assert!(
        description.ends_with("unknown_timezone."),
        "{sdk}: the description's last line lists the types: {description}"
    );
    assert!(
        now["_meta"].is_null()
            || now["_meta"]["narrowgate/errors"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("unknown_timezone"))),
        "{sdk}: {now}"
    );
    assert_eq!(r[1]["is_error"], false, "{sdk}: {}", r[1]);
    // The upstream's own tool error, typed by the contract's `errors:`.
    let e = error_of(r, 2);
    assert_eq!(
        (&e["type"], &e["retryable"]),
        (&json!("unknown_timezone"), &json!(false)),
        "{sdk}: {e}"
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Mars/Olympus"),
        "{sdk}: {e}"
    );
    assert_eq!(error_of(r, 3)["type"], "invalid_arguments", "{sdk}");
    assert_eq!(r[4]["is_error"], false, "{sdk}: {}", r[4]);
    let limited = error_of(r, 5);
    assert_eq!(limited["type"], "rate_limited", "{sdk}: {limited}");
    assert!(
        limited["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 1000),
        "{sdk}: {limited}"
    );
    assert_eq!(error_of(r, 6)["type"], "denied", "{sdk}");
    // The fallback's answer: a result of `now`, marked.
    assert_eq!(r[7]["is_error"], false, "{sdk}: {}", r[7]);
    assert_eq!(
        r[7]["structured_content"]["timezone"], "UTC",
        "{sdk}: {}",
        r[7]
    );
    // Degraded: not an error, the operator's text, and what failed still readable.
    assert_eq!(r[8]["is_error"], false, "{sdk}: {}", r[8]);
    assert_eq!(
        r[8]["content"],
        json!(["the clock is resting"]),
        "{sdk}: {}",
        r[8]
    );
    let degraded = &r[8]["structured_content"]["error"];
    assert_eq!(
        (&degraded["type"], &degraded["degraded"]),
        (&json!("unavailable"), &json!(true)),
        "{sdk}"
    );
    // The second identical call comes from the cache: the same answer, marked.
    assert_eq!(
        r[9]["structured_content"], r[10]["structured_content"],
        "{sdk}"
    );
}

/// Proves: the TypeScript SDK, which validates every `structuredContent` (errors included)
/// against the published `outputSchema`, accepts each typed error and reads its type: a declared
/// type from the upstream's text, `invalid_arguments`, `rate_limited` with its wait, `denied`;
/// a fallback answers from the other tool and a degrade with the operator's text; the receipts
/// record each type, the fallback taken and the cache hit.
#[test]
fn the_typescript_sdk_reads_every_failure_by_its_type() {
    let gw = time_gateway();
    let out = ts_client(&gw.url, KEY, &json!({"steps": steps()}));
    assert!(out.get("results").is_some(), "{out}\n{}", gw.log());
    for (i, r) in out["results"]
        .as_array()
        .expect("results")
        .iter()
        .enumerate()
    {
        assert!(
            r.get("error").is_none(),
            "step {i}: the SDK refused it: {r}"
        );
    }
    assert_typed(&out, "typescript");
    assert_receipts(&gw);
}

/// Proves: the same failures reach the Python SDK 2.x (both handshakes) with the same types.
#[test]
fn the_python_sdk_reads_every_failure_by_its_type() {
    for mode in ["auto", "legacy"] {
        let gw = time_gateway();
        let out = PyClient::V2(mode).run(&gw.url, KEY, &steps());
        assert_typed(&out, &format!("python {mode}"));
    }
}

/// Asserts the receipts of [`steps`]: the error type of each failure, the fallback taken (and the
/// fallback's own receipt), the cached answer without an upstream attempt.
fn assert_receipts(gw: &Gateway) {
    let receipts = receipts_json(&gw.config_path(), &[]);
    let row = |tool: &str, nth: usize| -> &Value {
        receipts
            .iter()
            .filter(|r| r["tool"] == tool)
            .nth(nth)
            .unwrap_or_else(|| panic!("receipt {nth} of {tool}: {receipts:#?}"))
    };
    assert_eq!(row("now", 1)["error_type"], "unknown_timezone");
    assert_eq!(row("now", 1)["outcome"], "tool_error");
    assert_eq!(row("now", 2)["error_type"], "invalid_arguments");
    assert_eq!(row("now_limited", 1)["error_type"], "rate_limited");
    assert_eq!(row("now_guarded", 0)["error_type"], "denied");
    let mirrored = row("now_mirrored", 0);
    assert_eq!(
        (&mirrored["error_type"], &mirrored["fallback"]),
        (&json!("unavailable"), &json!("now")),
        "{mirrored}"
    );
    // The fallback's own call: its own receipt, a success.
    assert_eq!(row("now", 3)["outcome"], "ok");
    assert_eq!(row("now_degraded", 0)["fallback"], "degrade");
    let (first, second) = (row("now_cached", 0), row("now_cached", 1));
    assert_eq!(
        (&first["cached"], &first["attempts"]),
        (&json!(false), &json!(1))
    );
    assert_eq!(
        (&second["cached"], &second["attempts"]),
        (&json!(true), &json!(0))
    );
    assert_eq!(second["outcome"], "ok");
}
