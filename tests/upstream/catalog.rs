//! The tool catalog: names, descriptions, input and output schemas, and the limits they state.
//! `weather`/`bad_weather` declare the draft-07 dialect like zod-based npm servers do; the
//! others use plain (2020-12 by default) schemas.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool};
use serde_json::{Value, json};

/// Draft-07 dialect marker, as emitted by npm servers built with zod-to-json-schema.
const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";
/// Text the gateway must never forward (carried by `bad_weather`, whose result it rejects).
pub const SECRET_MARKER: &str = "UPSTREAM-SECRET-DATA";
/// Upper bound for `big`, so a typo cannot exhaust memory.
pub const BIG_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Upper bound for `slow`.
pub const SLOW_MAX_MS: u64 = 600_000;
/// Exit code of the `crash` tool.
pub const CRASH_EXIT_CODE: i32 = 3;
pub const CITIES: [&str; 3] = ["New York", "Chicago", "Los Angeles"];

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

/// Input schema of a tool without parameters (the shape the MCP spec recommends).
fn no_params() -> Arc<JsonObject> {
    object(json!({"type": "object", "properties": {}, "additionalProperties": false}))
}

fn weather_input() -> Arc<JsonObject> {
    object(json!({
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {
            "location": {"type": "string", "enum": CITIES, "description": "City name"}
        },
        "required": ["location"],
        "additionalProperties": false
    }))
}

pub fn base_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Echoes the message back as text.",
            object(json!({
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            })),
        ),
        Tool::new(
            "add",
            "Adds two numbers.",
            object(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"sum": {"type": "number"}},
            "required": ["sum"]
        }))),
        Tool::new(
            "weather",
            "Current weather for a city (deterministic).",
            weather_input(),
        )
        .with_raw_output_schema(object(json!({
            "$schema": DRAFT_07,
            "type": "object",
            "properties": {
                "temperature": {"type": "number"},
                "conditions": {"type": "string"},
                "humidity": {"type": "number"}
            },
            "required": ["temperature", "conditions", "humidity"],
            "additionalProperties": false
        }))),
        Tool::new(
            "bad_weather",
            "Like weather, but returns an impossible temperature and leaks a secret marker.",
            weather_input(),
        ),
        Tool::new(
            "text_json",
            "Returns JSON only as a text block (no structuredContent).",
            no_params(),
        ),
        Tool::new(
            "big",
            "Returns one text block of `bytes` 'x' characters.",
            object(json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer", "minimum": 0, "maximum": BIG_MAX_BYTES}},
                "required": ["bytes"]
            })),
        ),
        Tool::new("fail", "Always fails with a tool error.", no_params()),
        Tool::new(
            "slow",
            "Sleeps `ms` milliseconds, then answers.",
            object(json!({
                "type": "object",
                "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": SLOW_MAX_MS}},
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "crash",
            "Exits the upstream process (code 3) without answering.",
            no_params(),
        ),
        Tool::new(
            "whoami",
            "Returns the HTTP request headers this upstream received, and the JSON-RPC request id under `:id`, as JSON text.",
            no_params(),
        ),
        Tool::new(
            "toggle_extra",
            "Adds or removes the `extra` tool and sends notifications/tools/list_changed.",
            no_params(),
        ),
        Tool::new(
            "counter",
            "Increments a process-wide counter, waits `delay_ms` (default 0), returns the count.",
            object(json!({
                "type": "object",
                "properties": {"delay_ms": {"type": "integer", "minimum": 0, "maximum": SLOW_MAX_MS}},
                "additionalProperties": false
            })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"count": {"type": "integer"}},
            "required": ["count"]
        }))),
        Tool::new(
            "peek_counter",
            "Returns the counter without incrementing it, how many `slow` calls were cancelled, and how \
             many `counter` and `slow` calls are running now.",
            no_params(),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"count": {"type": "integer"}, "cancelled": {"type": "integer"},
                "running": {"type": "integer"}},
            "required": ["count"]
        }))),
        Tool::new(
            "touch_resource",
            "Sends notifications/resources/updated for `uri` to every session subscribed to it; returns how many sessions it reached.",
            object(json!({
                "type": "object",
                "properties": {"uri": {"type": "string", "maxLength": 2048}},
                "required": ["uri"],
                "additionalProperties": false
            })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"notified": {"type": "integer"}},
            "required": ["notified"]
        }))),
        Tool::new(
            "list_roots",
            "Asks the caller for its roots (roots/list) during the call and returns them.",
            no_params(),
        ),
        Tool::new(
            "asks_rounds",
            "MCP 2026-07-28 only: asks the caller to confirm `rounds` times, one multi round-trip \
             request each, then returns the confirmations.",
            object(json!({
                "type": "object",
                "properties": {"rounds": {"type": "integer", "minimum": 1, "maximum": 100}},
                "required": ["rounds"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "echo_meta",
            "Returns the request's _meta as this upstream received it.",
            object(json!({"type": "object", "properties": {}})),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"meta": {"type": "object"}},
            "required": ["meta"]
        }))),
        Tool::new(
            "refund_order",
            "Refunds `amount` of the order `order_id`, with an optional `note` (pretend: nothing is stored).",
            object(json!({
                "type": "object",
                "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"},
                    "note": {"type": "string"}},
                "required": ["order_id", "amount"]
            })),
        )
        .with_raw_output_schema(object(json!({
            "type": "object",
            "properties": {"order_id": {"type": "string"}, "amount": {"type": "number"},
                "refunded": {"type": "boolean"}},
            "required": ["order_id", "amount", "refunded"]
        }))),
        Tool::new(
            "garbage",
            "Writes a line that is not JSON-RPC to stdout (stdio mode), then answers.",
            no_params(),
        ),
    ]
}

/// The tool `--modern-only-tool` offers to 2026-07-28 clients only.
pub fn modern_only_tool(name: &'static str) -> Tool {
    Tool::new(name, "Offered only on MCP 2026-07-28.", no_params())
}

pub fn extra_tool() -> Tool {
    Tool::new(
        "extra",
        "Only listed while toggle_extra has enabled it.",
        no_params(),
    )
}
