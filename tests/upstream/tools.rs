//! Tool implementations. Arguments are validated by hand, minimally: a bad argument is a tool
//! error (`isError: true`), an unknown tool is a -32602 protocol error.

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, JsonObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use crate::catalog::{BIG_MAX_BYTES, CITIES, CRASH_EXIT_CODE, SECRET_MARKER, SLOW_MAX_MS};
use crate::handler::DemoUpstream;
use crate::{ask, conformance, relay};

/// Dispatches one `tools/call`.
pub async fn call(
    server: &DemoUpstream,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.as_ref();
    let empty = JsonObject::new();
    let args = Args {
        tool: name,
        map: request.arguments.as_ref().unwrap_or(&empty),
    };
    let outcome = match name {
        "echo" => echo(&args),
        "add" => add(&args),
        "weather" => weather(&args),
        "bad_weather" => bad_weather(&args),
        "text_json" => args
            .only(&[])
            .map(|()| text(r#"{"temperature": 21, "conditions": "Clear"}"#)),
        "big" => big(&args),
        "fail" => args.only(&[]).map(|()| {
            CallToolResult::error(vec![ContentBlock::text("upstream failure: simulated")])
        }),
        "slow" => slow(server, &args, context).await,
        "crash" => {
            tracing::warn!("crash tool called: exiting with code {CRASH_EXIT_CODE}");
            std::process::exit(CRASH_EXIT_CODE)
        }
        "whoami" => args.only(&[]).map(|()| whoami(context)),
        "toggle_extra" => match args.only(&[]) {
            Ok(()) => Ok(toggle_extra(server, context).await),
            Err(error) => Err(error),
        },
        "counter" => counter(server, &args).await,
        "peek_counter" => args.only(&[]).map(|()| {
            CallToolResult::structured(
                json!({"count": server.counter(), "cancelled": server.cancelled(),
                    "running": server.running()}),
            )
        }),
        "garbage" => args.only(&[]).map(|()| garbage()),
        "refund_order" => args.only(&["order_id", "amount", "note"]).and_then(|()| {
            let order_id = args.string("order_id")?;
            let amount = args.number("amount")?;
            Ok(CallToolResult::structured(
                json!({"order_id": order_id, "amount": amount, "refunded": true}),
            ))
        }),
        "list_roots" => match args.only(&[]) {
            Ok(()) => return Ok(relay::list_roots(request, context).await),
            Err(error) => Err(error),
        },
        "asks_rounds" => match args.only(&["rounds"]).and_then(|()| args.number("rounds")) {
            Ok(rounds) => return ask::rounds(request, context, rounds.as_u64().unwrap_or(1)),
            Err(error) => Err(error),
        },
        "echo_meta" => return relay::echo_meta(context).map(Into::into),
        "touch_resource" => match args.only(&["uri"]).and_then(|()| args.string("uri")) {
            Ok(uri) => Ok(CallToolResult::structured(
                json!({"notified": server.touch_resource(uri).await}),
            )),
            Err(error) => Err(error),
        },
        "extra" if server.extra_enabled() => args.only(&[]).map(|()| text("extra")),
        _ => {
            if let Some(result) = conformance::call(server, request, args.map, context).await {
                return result;
            }
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                None,
            ));
        }
    };
    let result =
        outcome.unwrap_or_else(|message| CallToolResult::error(vec![ContentBlock::text(message)]));
    Ok(result.into())
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// A tool's arguments plus the tool name, for error messages. Errors are caller-visible text.
struct Args<'a> {
    tool: &'a str,
    map: &'a JsonObject,
}

impl Args<'_> {
    fn invalid(&self, detail: impl std::fmt::Display) -> String {
        format!("Invalid arguments for tool '{}': {detail}", self.tool)
    }

    fn required(&self, key: &str) -> Result<&Value, String> {
        self.map
            .get(key)
            .ok_or_else(|| self.invalid(format_args!("missing required property '{key}'")))
    }

    /// Rejects properties outside `allowed` (for schemas with `additionalProperties: false`).
    fn only(&self, allowed: &[&str]) -> Result<(), String> {
        match self.map.keys().find(|key| !allowed.contains(&key.as_str())) {
            Some(key) => Err(self.invalid(format_args!("unexpected property '{key}'"))),
            None => Ok(()),
        }
    }

    fn string(&self, key: &str) -> Result<&str, String> {
        self.required(key)?
            .as_str()
            .ok_or_else(|| self.invalid(format_args!("'{key}' must be a string")))
    }

    fn number(&self, key: &str) -> Result<&serde_json::Number, String> {
        match self.required(key)? {
            Value::Number(number) => Ok(number),
            _ => Err(self.invalid(format_args!("'{key}' must be a number"))),
        }
    }

    fn uint(&self, key: &str, max: u64) -> Result<u64, String> {
        let value = self.required(key)?;
        // Accept 3.0 as an integer, like JSON Schema does.
        let parsed = value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= max as f64)
                .map(|f| f as u64)
        });
        match parsed {
            Some(n) if n <= max => Ok(n),
            _ => Err(self.invalid(format_args!(
                "'{key}' must be an integer between 0 and {max}"
            ))),
        }
    }
}

fn echo(args: &Args<'_>) -> Result<CallToolResult, String> {
    let message = args.string("message")?;
    Ok(text(format!("Echo: {message}")))
}

fn add(args: &Args<'_>) -> Result<CallToolResult, String> {
    let (a, b) = (args.number("a")?, args.number("b")?);
    // Integers stay integers (5 + 3 = 8, not 8.0); anything else is summed as f64.
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) if x.checked_add(y).is_some() => json!(x + y),
        _ => {
            let sum = a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN);
            if !sum.is_finite() {
                return Err(args.invalid("the sum is not a finite number"));
            }
            json!(sum)
        }
    };
    Ok(CallToolResult::structured(json!({"sum": sum})))
}

fn city(args: &Args<'_>) -> Result<&'static str, String> {
    args.only(&["location"])?;
    let location = args.string("location")?;
    CITIES
        .into_iter()
        .find(|city| *city == location)
        .ok_or_else(|| {
            args.invalid(format_args!(
                "'location' must be one of {CITIES:?}, got {location:?}"
            ))
        })
}

fn weather(args: &Args<'_>) -> Result<CallToolResult, String> {
    let report = match city(args)? {
        "New York" => json!({"temperature": 22.5, "conditions": "Partly cloudy", "humidity": 65}),
        "Chicago" => json!({"temperature": 18.5, "conditions": "Windy", "humidity": 60}),
        _ => json!({"temperature": 27.5, "conditions": "Sunny", "humidity": 35}),
    };
    Ok(CallToolResult::structured(report))
}

fn bad_weather(args: &Args<'_>) -> Result<CallToolResult, String> {
    city(args)?;
    let report = json!({"temperature": 999, "conditions": "Sunny", "humidity": 40});
    let mut result = CallToolResult::structured(report);
    result.content.push(ContentBlock::text(format!(
        "{SECRET_MARKER}: internal sensor dump, must never reach the caller"
    )));
    Ok(result)
}

/// Counts first, then waits `delay_ms` (default 0): the effect has happened even when the caller
/// stops waiting, which is what at-most-once tests need to observe.
async fn counter(server: &DemoUpstream, args: &Args<'_>) -> Result<CallToolResult, String> {
    args.only(&["delay_ms"])?;
    let delay = match args.map.get("delay_ms") {
        Some(_) => args.uint("delay_ms", SLOW_MAX_MS)?,
        None => 0,
    };
    let _running = server.start_running();
    let count = server.bump_counter();
    // The tool's own delay (the behaviour callers ask for), not a wait for anything.
    tokio::time::sleep(Duration::from_millis(delay)).await;
    Ok(CallToolResult::structured(json!({"count": count})))
}

/// Writes a line that is not JSON-RPC onto the protocol stream (stdio only), then answers.
fn garbage() -> CallToolResult {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(b"this line is not JSON-RPC\n");
    let _ = out.flush();
    text("sent a line of garbage before this answer")
}

fn big(args: &Args<'_>) -> Result<CallToolResult, String> {
    let bytes = args.uint("bytes", BIG_MAX_BYTES)?;
    let len = usize::try_from(bytes).map_err(|_| args.invalid("'bytes' is too large"))?;
    Ok(text("x".repeat(len)))
}

async fn slow(
    server: &DemoUpstream,
    args: &Args<'_>,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, String> {
    let ms = args.uint("ms", SLOW_MAX_MS)?;
    let _running = server.start_running();
    // The tool's own delay (the behaviour callers ask for), not a wait for anything.
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text(format!("slept {ms}"))),
        () = context.ct.cancelled() => {
            server.note_cancelled();
            Err(format!("cancelled before {ms} ms elapsed"))
        }
    }
}

/// The HTTP request headers (lower-case names, sorted; repeated headers joined with ", "), and
/// the JSON-RPC request id under `:id` (a name no header can have).
fn whoami(context: &RequestContext<RoleServer>) -> CallToolResult {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    headers.insert(":id".to_owned(), context.id.to_string());
    if let Some(parts) = context.extensions.get::<http::request::Parts>() {
        for (name, value) in &parts.headers {
            let value = String::from_utf8_lossy(value.as_bytes());
            headers
                .entry(name.as_str().to_owned())
                .and_modify(|joined| {
                    joined.push_str(", ");
                    joined.push_str(&value);
                })
                .or_insert_with(|| value.into_owned());
        }
    }
    text(json!(headers).to_string())
}

async fn toggle_extra(
    server: &DemoUpstream,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let enabled = server.toggle_extra();
    // Legacy (initialize-based) peers get the notification directly; 2026-07-28 peers get it
    // through their `subscriptions/listen` stream (see `DemoUpstream::listen`).
    let legacy = context
        .protocol_version()
        .is_none_or(|version| version.has_initialize());
    if legacy && let Err(error) = context.peer.notify_tool_list_changed().await {
        tracing::warn!(%error, "could not send notifications/tools/list_changed");
    }
    text(if enabled {
        "extra enabled"
    } else {
        "extra disabled"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::base_tools;

    fn args(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        }
    }

    fn run(
        f: fn(&Args<'_>) -> Result<CallToolResult, String>,
        value: Value,
    ) -> Result<CallToolResult, String> {
        let map = args(value);
        f(&Args {
            tool: "t",
            map: &map,
        })
    }

    #[test]
    fn schemas_are_objects_and_names_unique() {
        let tools = base_tools();
        let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), tools.len());
        for tool in &tools {
            assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
        }
    }

    #[test]
    fn add_keeps_integers_and_rejects_strings() {
        let ok = run(add, json!({"a": 5, "b": 3})).expect("valid");
        assert_eq!(ok.structured_content, Some(json!({"sum": 8})));
        let ok = run(add, json!({"a": 0.5, "b": 1})).expect("valid");
        assert_eq!(ok.structured_content, Some(json!({"sum": 1.5})));
        let err = run(add, json!({"a": "5", "b": 3})).expect_err("string");
        assert!(err.contains("'a' must be a number"), "{err}");
        assert!(run(add, json!({"a": 1})).is_err());
    }

    #[test]
    fn weather_validates_city_and_extra_properties() {
        let ok = run(weather, json!({"location": "Chicago"})).expect("valid");
        assert_eq!(
            ok.structured_content,
            Some(json!({"temperature": 18.5, "conditions": "Windy", "humidity": 60}))
        );
        assert!(run(weather, json!({"location": "Paris"})).is_err());
        assert!(run(weather, json!({"location": "Chicago", "x": 1})).is_err());
    }

    #[test]
    fn big_and_echo() {
        let ok = run(big, json!({"bytes": 5})).expect("valid");
        assert_eq!(
            ok.content[0].as_text().map(|t| t.text.as_str()),
            Some("xxxxx")
        );
        assert!(run(big, json!({"bytes": -1})).is_err());
        assert!(run(big, json!({"bytes": BIG_MAX_BYTES + 1})).is_err());
        let ok = run(echo, json!({"message": "hi"})).expect("valid");
        assert_eq!(
            ok.content[0].as_text().map(|t| t.text.as_str()),
            Some("Echo: hi")
        );
    }
}
