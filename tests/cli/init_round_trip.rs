//! `init` round trips: init → contract file → `check` → `serve` → tools/list through the gateway,
//! against the demo upstream, server-everything, server-filesystem and a Python SDK server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Stdio;

use narrowgate::harness::ContractSet;
use narrowgate::harness::schema::to_2020_12;
use rmcp::ServiceExt;
use rmcp::model::Tool;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::common::peers::{node_bin, py2_python};
use super::common::{Gateway, KEY, call, callers, client, demo_upstream_bin, text_of};
use super::{Setup, stderr, stdout};

/// An upstream for a round trip: how to start it, and one call that must work through the
/// gateway (exposed name, arguments, text expected in the result).
struct Upstream {
    command: PathBuf,
    args: Vec<String>,
    call: (&'static str, Value, &'static str),
}

impl Upstream {
    fn yaml(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| serde_json::to_string(a).expect("json"))
            .collect();
        format!(
            "upstreams:\n  up:\n    command: {}\n    args: [{}]\n",
            serde_json::to_string(&self.command.display().to_string()).expect("json"),
            args.join(", ")
        )
    }

    /// The upstream's own tool list, read directly with rmcp's client declaring what the gateway
    /// declares upstream (sampling, elicitation, roots: server-everything offers some tools only
    /// to clients that can answer them).
    async fn tools(&self) -> Vec<Tool> {
        let mut cmd = tokio::process::Command::new(&self.command);
        cmd.args(&self.args);
        let (transport, _) = TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("start the upstream");
        let capabilities: rmcp::model::ClientCapabilities =
            serde_json::from_value(serde_json::json!({
                "sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}
            }))
            .expect("capabilities");
        let info = rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("init-round-trip", "1"),
        );
        let client = info.serve(transport).await.expect("upstream handshake");
        let tools = client.list_all_tools().await.expect("upstream tools");
        let _ = client.cancel().await;
        tools
    }
}

/// init → contract file → `check` (exit 0, every tool narrower with its pin matching) → `serve`
/// → tools/list through the gateway: the same tools, texts, and input schemas that accept and
/// reject the same sample arguments as the upstream's; one call goes through.
async fn round_trip(upstream: Upstream) {
    let config = format!("{}{}", upstream.yaml(), callers(&[]));
    let setup = Setup::new(&config, &[]);
    let init = setup.run("init", &["--upstream", "up"]);
    assert!(init.status.success(), "init failed: {init:?}");
    assert!(
        stderr(&init).is_empty(),
        "init left tools out: {}",
        stderr(&init)
    );
    let contract_text = stdout(&init);
    setup.contract("up.yaml", &contract_text);

    let (code, report) = setup.check_json(&[]);
    assert_eq!(
        code, 0,
        "check of the init output:\n{report:#}\n{contract_text}"
    );
    for row in report["tools"].as_array().expect("tools") {
        assert_eq!(row["status"], "enabled", "{row}");
        assert_eq!(row["narrowing"]["verdict"], "narrower", "{row}");
        assert_eq!(row["pin"], "matches", "{row}");
    }
    // init guesses `side_effects: irreversible` for every tool not marked read-only, and `check`
    // warns of those without `approval` for the operator to decide; the caller here is allowed
    // tools only, so scaffolded resources and prompts are warned unreachable: any other warning
    // fails.
    let others: Vec<&Value> = report["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| {
            !w.as_str().is_some_and(|w| {
                w.contains("`approval: none`")
                    || ((w.starts_with("resource") || w.starts_with("prompt"))
                        && w.contains("is reachable by no caller"))
            })
        })
        .collect();
    assert!(others.is_empty(), "{report:#}");

    let contracts = ContractSet::load_dir(&setup.dir.path().join("contracts")).expect("loads");
    let upstream_name: BTreeMap<String, String> = contracts
        .tools
        .values()
        .map(|c| (c.name.clone(), c.upstream_tool.clone()))
        .collect();
    let upstream_tools = upstream.tools().await;
    let by_name: BTreeMap<String, &Tool> = upstream_tools
        .iter()
        .map(|t| (t.name.to_string(), t))
        .collect();

    let gw = Gateway::start(&config, &[("up.yaml", &contract_text)]);
    let client = client(&gw.url, KEY).await;
    let published = client.list_all_tools().await.expect("tools/list");

    let published_upstream_names: BTreeSet<&str> = published
        .iter()
        .map(|t| upstream_name[t.name.as_ref()].as_str())
        .collect();
    let expected: BTreeSet<&str> = by_name.keys().map(String::as_str).collect();
    assert_eq!(
        published_upstream_names, expected,
        "the gateway must list every upstream tool"
    );

    let mut compared = 0;
    for tool in &published {
        let original = by_name[upstream_name[tool.name.as_ref()].as_str()];
        // The published description ends with the error types the tool can answer.
        let description = tool
            .description
            .as_deref()
            .map(super::common::without_error_types);
        assert_eq!(
            description,
            original.description.as_deref(),
            "{}",
            tool.name
        );
        let title = original
            .title
            .clone()
            .or_else(|| original.annotations.as_ref().and_then(|a| a.title.clone()));
        assert_eq!(tool.title, title, "{}", tool.name);
        let output = |t: &Tool| {
            t.output_schema
                .as_ref()
                .map(|o| Value::Object(o.as_ref().clone()))
        };
        assert_eq!(
            output(tool),
            output(original).map(|o| super::common::published_output(&to_2020_12(&o))),
            "{}: the published outputSchema must be the upstream's (in 2020-12)",
            tool.name
        );
        let upstream_schema = Value::Object(original.input_schema.as_ref().clone());
        let published_schema = Value::Object(tool.input_schema.as_ref().clone());
        let u = asserting_formats(&upstream_schema);
        let p = asserting_formats(&published_schema);
        let samples = samples(&to_2020_12(&upstream_schema));
        let (mut accepted, mut rejected) = (0, 0);
        for sample in &samples {
            let verdict = u.is_valid(sample);
            assert_eq!(
                p.is_valid(sample),
                verdict,
                "{}: published and upstream schemas disagree on {sample}\nupstream: {upstream_schema}\npublished: {published_schema}",
                tool.name
            );
            if verdict {
                accepted += 1
            } else {
                rejected += 1
            }
            compared += 1;
        }
        assert!(
            accepted > 0 && rejected > 0,
            "{}: the samples must include accepted and rejected arguments ({accepted}/{rejected})",
            tool.name
        );
    }
    assert!(compared > 0);

    let (name, args, expect) = &upstream.call;
    let result = call(&client, name, args.clone())
        .await
        .expect("call through the gateway");
    let text = text_of(&result);
    assert_ne!(result.is_error, Some(true), "{text}");
    assert!(text.contains(expect), "{name}: {text}");
    let _ = client.cancel().await;
}

/// A validator for `schema` in the draft it declares (2020-12 if none), with `format` asserted
/// whatever the draft: draft-07 validators assert it by default and 2020-12 ones do not, a
/// difference of defaults, not of the schemas being compared.
fn asserting_formats(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("{schema} does not compile: {e}"))
}

/// Sample arguments for an (upstream, 2020-12) object schema: a filled-in object, then for each
/// property values of every JSON type, its enum values and bounds, its absence, an unknown
/// property, and non-objects.
fn samples(schema: &Value) -> Vec<Value> {
    let base = good(schema, schema, 0);
    let mut out = vec![base.clone(), json!({}), json!("x"), json!([])];
    let Value::Object(base) = base else {
        return out;
    };
    let mut extra = base.clone();
    extra.insert("zz_unknown".into(), json!(1));
    out.push(Value::Object(extra));
    let properties = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, sub) in &properties {
        let mut values = vec![
            json!("x"),
            json!(""),
            json!(0),
            json!(1),
            json!(-1),
            json!(2.5),
            json!(1e12),
            json!(true),
            Value::Null,
            json!([]),
            json!(["x"]),
            json!({}),
            good(sub, schema, 1),
        ];
        for key in ["enum", "examples"] {
            values.extend(sub[key].as_array().cloned().unwrap_or_default());
        }
        for key in ["minimum", "maximum", "minLength", "maxLength"] {
            if let Some(n) = sub[key].as_f64() {
                values.extend([json!(n - 1.0), json!(n), json!(n + 1.0)]);
            }
        }
        for v in values {
            let mut varied = base.clone();
            varied.insert(name.clone(), v);
            out.push(Value::Object(varied));
        }
        let mut without = base.clone();
        without.remove(name);
        out.push(Value::Object(without));
    }
    out
}

/// A value that `schema` probably accepts, built from its enums, defaults, bounds and required
/// properties.
fn good(schema: &Value, root: &Value, depth: usize) -> Value {
    let schema = match schema["$ref"].as_str() {
        Some(r) => r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .unwrap_or(schema),
        None => schema,
    };
    if let Some(first) = schema["enum"].get(0) {
        return first.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    for branch in ["anyOf", "oneOf"] {
        if let Some(first) = schema[branch].get(0) {
            return good(first, root, depth);
        }
    }
    let ty = match &schema["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(ts) => ts.first().and_then(Value::as_str).unwrap_or("string"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match ty {
        "object" if depth < 6 => {
            let mut map = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                if let Some(name) = name.as_str() {
                    map.insert(
                        name.into(),
                        good(&schema["properties"][name], root, depth + 1),
                    );
                }
            }
            Value::Object(map)
        }
        "array" => {
            let n = schema["minItems"].as_u64().unwrap_or(1).max(1) as usize;
            Value::Array(vec![good(&schema["items"], root, depth + 1); n])
        }
        "integer" | "number" => schema["minimum"]
            .as_f64()
            .map(|m| json!(m.ceil() as i64))
            .unwrap_or(json!(1)),
        "boolean" => json!(true),
        "null" => Value::Null,
        // A string in the schema's `format` (formats are asserted here): a URL for `uri`, ...
        _ => match schema["format"].as_str() {
            Some("uri" | "url") => json!("https://example.com/a"),
            Some("email") => json!("a@example.com"),
            Some("date-time") => json!("2026-01-01T00:00:00Z"),
            Some("date") => json!("2026-01-01"),
            Some("uuid") => json!("00000000-0000-4000-8000-000000000000"),
            _ => json!("a".repeat(schema["minLength"].as_u64().unwrap_or(1) as usize)),
        },
    }
}

/// Proves: init's output for the repository's demo upstream loads as it is, passes `check`, and
/// exposes every tool unchanged through the gateway.
#[tokio::test]
async fn init_round_trip_demo_upstream() {
    round_trip(Upstream {
        command: demo_upstream_bin(),
        args: vec!["stdio".into()],
        call: ("echo", json!({"message": "round trip"}), "round trip"),
    })
    .await;
}

/// Proves: the same for `@modelcontextprotocol/server-everything` (draft-07 schemas).
#[tokio::test]
async fn init_round_trip_server_everything() {
    round_trip(Upstream {
        command: node_bin("mcp-server-everything"),
        args: vec!["stdio".into()],
        call: ("get-sum", json!({"a": 2, "b": 40}), "42"),
    })
    .await;
}

/// Proves: the same for `@modelcontextprotocol/server-filesystem`, rooted at a temporary folder.
#[tokio::test]
async fn init_round_trip_server_filesystem() {
    let root = tempfile::tempdir().expect("tempdir");
    let root_path = root.path().canonicalize().expect("canonical root");
    std::fs::write(root_path.join("hello.txt"), "hello from the root").expect("write");
    round_trip(Upstream {
        command: node_bin("mcp-server-filesystem"),
        args: vec![root_path.display().to_string()],
        call: (
            "read_text_file",
            json!({"path": root_path.join("hello.txt").display().to_string()}),
            "hello from the root",
        ),
    })
    .await;
}

/// Proves: tool names that clients cannot use (`files.read`, `files/read`) are mapped to valid,
/// distinct exposed names with `upstream_tool` kept, and calls reach the right upstream tool:
/// against a server built with the official Python SDK.
#[tokio::test]
async fn init_round_trip_maps_invalid_tool_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("odd_names.py");
    std::fs::write(&script, ODD_NAMES_SERVER).expect("write server");
    round_trip(Upstream {
        command: py2_python(),
        args: vec![script.display().to_string()],
        call: ("files_read_2", json!({"path": "b.txt"}), "second b.txt"),
    })
    .await;
}

const ODD_NAMES_SERVER: &str = r#"
from mcp.server.mcpserver import MCPServer

app = MCPServer("odd-names")

@app.tool(name="files.read", description="Reads a file (a dotted name).")
def first(path: str) -> str:
    return "first " + path

@app.tool(name="files/read", description="Maps to the same name as files.read.")
def second(path: str, limit: int = 10) -> str:
    return "second " + path

if __name__ == "__main__":
    app.run()
"#;
