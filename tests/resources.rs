//! Resources, prompts and completion under contract, against the real binary and the demo
//! upstream over stdio: what a caller lists, reads and gets is what a contract declares and its
//! globs allow; anything else is answered as if it did not exist; contents, arguments and
//! completions are checked; reads and gets leave receipts.

use crate::common;
#[path = "resources/complete_results.rs"]
mod complete_results;
#[path = "resources/listen.rs"]
mod listen;
#[path = "resources/updates.rs"]
mod updates;

use common::{BOB, CAROL, Gateway, KEY, client, demo_stdio_config, hash_key, receipts_json};
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, ErrorData, GetPromptRequestParams,
    ReadResourceRequestParams, Reference,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

/// alice may read `test://*` and get every prompt; bob may use tools only; carol may get
/// prompts but read no resource. The demo upstream speaks 2026-07-28.
fn config() -> String {
    config_over(false)
}

/// The same, the demo upstream speaking 2025-11-25 when `legacy` (`stdio --legacy`).
fn config_over(legacy: bool) -> String {
    let callers = format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n    resources: ['test://*']\n    prompts: ['*']\n  - name: bob\n    api_key_sha256: {}\n    tools: ['*']\n  - name: carol\n    api_key_sha256: {}\n    prompts: ['*']\n",
        hash_key(KEY),
        hash_key(BOB),
        hash_key(CAROL)
    );
    let config = demo_stdio_config(&callers, "");
    if legacy {
        config.replacen("args: [stdio]", "args: [stdio, --legacy]", 1)
    } else {
        config
    }
}

const CONTRACT: &str = r#"upstream: demo
tools:
  touch_resource:
    input:
      type: object
      properties: { uri: { type: string, maxLength: 200 } }
      required: [uri]
      additionalProperties: false
resources:
  - uri: "test://static-text"
    description: Static text, as declared
    mime_types: [text/plain]
  - uri: "test://static-binary"
    description: Declared as text, though the upstream serves a PNG
    mime_types: [text/plain]
  - uri_template: "test://template/{id}/data"
    description: Data by id
    variables: { id: { pattern: "^[0-9]{1,2}$" } }
    mime_types: [application/json]
prompts:
  greeting:
    upstream_prompt: test_prompt_with_arguments
    description: A greeting, as declared
    arguments:
      arg1: { required: true, enum: [park, party] }
      arg2: { required: true, pattern: "^[a-z]{1,8}$" }
  simple:
    upstream_prompt: test_simple_prompt
  embedded:
    upstream_prompt: test_prompt_with_embedded_resource
    arguments:
      resourceUri: { required: true }
"#;

fn start() -> Gateway {
    Gateway::start(&config(), &[("demo.yaml", CONTRACT)])
}

/// The JSON-RPC error of a failed request (panics on anything else).
fn protocol_error<T: std::fmt::Debug>(result: Result<T, ServiceError>) -> ErrorData {
    match result {
        Err(ServiceError::McpError(e)) => e,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

fn read(uri: &str) -> ReadResourceRequestParams {
    ReadResourceRequestParams::new(uri)
}

/// Proves listings show only what is declared and allowed, with the contract's texts: the
/// upstream's `test://watched-resource` (not declared) is not listed, bob (no `resources` or
/// `prompts` globs) sees nothing, and the upstream's descriptions never appear.
#[tokio::test]
async fn listings_show_only_what_is_declared_and_allowed() {
    let gw = start();
    let alice = client(&gw.url, KEY).await;
    let capabilities = &alice.peer_info().expect("initialized").capabilities;
    assert!(capabilities.resources.is_some() && capabilities.prompts.is_some());
    assert!(capabilities.completions.is_some());
    let resources = alice.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["test://static-text", "test://static-binary"]);
    let listed = serde_json::to_value(&resources).expect("json");
    assert_eq!(listed[0]["description"], "Static text, as declared");
    assert!(!listed.to_string().contains("A fixed text resource"));
    let templates = alice
        .list_all_resource_templates()
        .await
        .expect("templates/list");
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "test://template/{id}/data");
    let prompts = alice.list_all_prompts().await.expect("prompts/list");
    let mut names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["embedded", "greeting", "simple"]);

    let bob = client(&gw.url, BOB).await;
    assert!(bob.list_all_resources().await.expect("list").is_empty());
    assert!(
        bob.list_all_resource_templates()
            .await
            .expect("list")
            .is_empty()
    );
    assert!(bob.list_all_prompts().await.expect("list").is_empty());
}

/// Proves a read of an undeclared URI, of a declared one the caller may not read, and of a
/// template URI outside its variable's pattern all get the same -32602 "Resource not found" as a
/// URI that exists nowhere; an allowed read gets the upstream's contents; a content whose
/// mimeType is not declared is rejected. Each read leaves a receipt naming the URI.
#[tokio::test]
async fn reads_are_declared_allowed_and_checked() {
    let gw = start();
    let alice = client(&gw.url, KEY).await;
    let text = alice
        .read_resource(read("test://static-text"))
        .await
        .expect("allowed read");
    let text = serde_json::to_value(&text).expect("json");
    assert_eq!(
        text["contents"][0]["text"],
        "This is the content of the static text resource."
    );
    let data = alice
        .read_resource(read("test://template/42/data"))
        .await
        .expect("template read");
    assert!(
        serde_json::to_value(&data)
            .expect("json")
            .to_string()
            .contains("Data for ID: 42")
    );

    let nowhere = protocol_error(alice.read_resource(read("test://nowhere")).await);
    assert_eq!(
        (nowhere.code.0, nowhere.message.as_ref()),
        (-32602, "Resource not found")
    );
    for uri in [
        "test://watched-resource",
        "test://template/123/data",
        "test://template/ab/data",
    ] {
        let e = protocol_error(alice.read_resource(read(uri)).await);
        assert_eq!(
            (e.code.0, e.message.as_ref()),
            (-32602, "Resource not found"),
            "{uri}"
        );
    }
    let bob = client(&gw.url, BOB).await;
    let e = protocol_error(bob.read_resource(read("test://static-text")).await);
    assert_eq!(
        (e.code.0, e.message.as_ref()),
        (-32602, "Resource not found")
    );

    let png = protocol_error(alice.read_resource(read("test://static-binary")).await);
    assert!(png.message.contains("mimeType"), "{png:?}");
    assert!(!png.message.contains("iVBOR"), "{png:?}");

    let receipts = receipts_json(&gw.config_path(), &["--limit", "100"]);
    let outcome_of = |caller: &str, uri: &str| -> Vec<String> {
        receipts
            .iter()
            .filter(|r| r["caller"] == caller && r["tool"] == uri)
            .map(|r| r["outcome"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(outcome_of("alice", "test://static-text"), ["ok"]);
    assert_eq!(outcome_of("bob", "test://static-text"), ["denied"]);
    assert_eq!(
        outcome_of("alice", "test://static-binary"),
        ["rejected_output"]
    );
    assert_eq!(outcome_of("alice", "test://nowhere"), ["denied"]);
}

/// Proves prompts are got under the upstream's name with the contract's description; an
/// argument outside its enum or pattern, an undeclared one, or a missing required one is
/// refused with -32602 naming the argument but not its value; an unknown or forbidden prompt
/// is "Unknown prompt"; a resource embedded under a declared URI the caller may not read is
/// rejected, while one under a URI no contract declares is the prompt's own content.
#[tokio::test]
async fn prompts_are_declared_allowed_and_their_arguments_checked() {
    let gw = start();
    let alice = client(&gw.url, KEY).await;
    let get = |name: &str, args: Value| {
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = args.as_object().cloned();
        params
    };
    let ok = alice
        .get_prompt(get("greeting", json!({"arg1": "park", "arg2": "abc"})))
        .await
        .expect("allowed get");
    let ok = serde_json::to_value(&ok).expect("json");
    assert_eq!(ok["description"], "A greeting, as declared");
    assert!(ok.to_string().contains("arg1='park'"), "{ok}");

    for (args, argument) in [
        (json!({"arg1": "secretvalue", "arg2": "abc"}), "arg1"),
        (json!({"arg1": "park", "arg2": "NOT-LOWER"}), "arg2"),
        (json!({"arg1": "park"}), "arg2"),
        (
            json!({"arg1": "park", "arg2": "abc", "extra": "x"}),
            "extra",
        ),
    ] {
        let e = protocol_error(alice.get_prompt(get("greeting", args.clone())).await);
        assert_eq!(e.code.0, -32602, "{args}");
        assert!(e.message.contains(&format!("`{argument}`")), "{e:?}");
        assert!(!e.message.contains("secretvalue") && !e.message.contains("NOT-LOWER"));
    }
    for name in ["nope", "test_simple_prompt"] {
        let e = protocol_error(alice.get_prompt(get(name, json!({}))).await);
        assert_eq!(
            (e.code.0, e.message.as_ref()),
            (-32602, "Unknown prompt"),
            "{name}"
        );
    }
    let bob = client(&gw.url, BOB).await;
    let e = protocol_error(bob.get_prompt(get("simple", json!({}))).await);
    assert_eq!((e.code.0, e.message.as_ref()), (-32602, "Unknown prompt"));

    alice
        .get_prompt(get(
            "embedded",
            json!({"resourceUri": "test://static-text"}),
        ))
        .await
        .expect("an embedded resource alice may read");
    alice
        .get_prompt(get(
            "embedded",
            json!({"resourceUri": "test://example-resource"}),
        ))
        .await
        .expect("a resource under no declared URI is the prompt's content");
    let carol = client(&gw.url, CAROL).await;
    let e = protocol_error(
        carol
            .get_prompt(get(
                "embedded",
                json!({"resourceUri": "test://static-text"}),
            ))
            .await,
    );
    assert!(
        e.message
            .contains("embeds a declared resource the caller may not read"),
        "{e:?}"
    );

    let receipts = receipts_json(&gw.config_path(), &["--limit", "100"]);
    let mut greeting: Vec<&str> = receipts
        .iter()
        .filter(|r| r["tool"] == "greeting")
        .filter_map(|r| r["outcome"].as_str())
        .collect();
    greeting.sort();
    assert_eq!(
        greeting,
        [
            "ok",
            "rejected_input",
            "rejected_input",
            "rejected_input",
            "rejected_input"
        ]
    );
}

/// Proves completion is relayed only for declared arguments and template variables, and values
/// outside their enum/pattern are dropped: the upstream offers paris, park, party for `pa` and
/// 1, 12, 123, 42 for the template's id.
#[tokio::test]
async fn completions_are_filtered_by_the_contract() {
    let gw = start();
    let alice = client(&gw.url, KEY).await;
    let complete = |reference: Reference, name: &str, value: &str| {
        CompleteRequestParams::new(reference, ArgumentInfo::new(name, value))
    };
    let prompt = alice
        .complete(complete(Reference::for_prompt("greeting"), "arg1", "pa"))
        .await
        .expect("complete");
    assert_eq!(prompt.completion.values, ["park", "party"]);
    let template = alice
        .complete(complete(
            Reference::for_resource("test://template/{id}/data"),
            "id",
            "",
        ))
        .await
        .expect("complete");
    assert_eq!(template.completion.values, ["1", "12", "42"]);

    let e = protocol_error(
        alice
            .complete(complete(
                Reference::for_prompt("test_prompt_with_arguments"),
                "arg1",
                "pa",
            ))
            .await,
    );
    assert_eq!(e.code.0, -32602);
    let e = protocol_error(
        alice
            .complete(complete(Reference::for_prompt("greeting"), "other", ""))
            .await,
    );
    assert_eq!(e.code.0, -32602);
}

/// Proves `resources/subscribe` and `unsubscribe` are relayed for a declared URI the caller may
/// read, and refused as "Resource not found" otherwise (undeclared, or not the caller's).
#[tokio::test]
#[allow(deprecated)]
async fn subscriptions_only_for_declared_and_allowed_uris() {
    use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
    let gw = start();
    let alice = client(&gw.url, KEY).await;
    alice
        .subscribe(SubscribeRequestParams::new("test://static-text"))
        .await
        .expect("allowed subscribe");
    let unsubscribe: UnsubscribeRequestParams =
        serde_json::from_value(json!({"uri": "test://static-text"})).expect("params");
    alice
        .unsubscribe(unsubscribe)
        .await
        .expect("allowed unsubscribe");
    let e = protocol_error(
        alice
            .subscribe(SubscribeRequestParams::new("test://watched-resource"))
            .await,
    );
    assert_eq!(
        (e.code.0, e.message.as_ref()),
        (-32602, "Resource not found")
    );
    let bob = client(&gw.url, BOB).await;
    let e = protocol_error(
        bob.subscribe(SubscribeRequestParams::new("test://static-text"))
            .await,
    );
    assert_eq!(
        (e.code.0, e.message.as_ref()),
        (-32602, "Resource not found")
    );
}

/// Proves `narrowgate check` reports the declared resources and prompts, and warns of a URI a
/// contracted tool's description points to that no contract declares (offline: from the
/// contract's own text), but not of a declared one.
#[test]
fn check_reports_resources_and_warns_of_undeclared_links() {
    let contract = CONTRACT.replace(
        "  touch_resource:\n",
        "  touch_resource:\n    description: Touches test://static-text or test://undeclared-thing.\n",
    );
    let dir = common::ConfigDir::new(&config(), &[("demo.yaml", contract.as_str())]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args(["check", "--offline", "--json", "--config"])
        .arg(dir.config())
        .output()
        .expect("run check");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json report");
    let resources: Vec<&str> = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["resource"].as_str())
        .collect();
    assert_eq!(
        resources,
        [
            "test://static-text",
            "test://static-binary",
            "test://template/{id}/data"
        ]
    );
    assert_eq!(report["prompts"].as_array().map(Vec::len), Some(3));
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("test://undeclared-thing"), "{warnings}");
    assert!(!warnings.contains("`test://static-text`"), "{warnings}");
}

/// Proves: the MCP Inspector CLI (2.12.0) through the gateway lists only the declared resources
/// and prompts with the contracts' texts, reads a declared resource and gets a declared prompt
/// with in-contract arguments, and fails (never the upstream's answer) for a resource it may not
/// read, a prompt argument outside its `enum`, and a resource no contract declares.
#[test]
fn the_mcp_inspector_reads_resources_and_gets_prompts_through_the_gateway() {
    use common::peers::{CLIENT_DEADLINE, node_bin};
    use common::process::run;
    let gw = start();
    let home = tempfile::tempdir().expect("tempdir");
    let inspector = |key: &str, args: &[&str]| {
        let mut cmd = std::process::Command::new(node_bin("mcp-inspector"));
        cmd.env("HOME", home.path())
            .args(["--cli", &gw.url, "--format", "json", "--stored-auth-only"])
            .args(["--header", &format!("Authorization: Bearer {key}")])
            .args(args);
        run(&mut cmd, CLIENT_DEADLINE)
    };

    let listed = inspector(KEY, &["--method", "resources/list"]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    let listed = listed.json();
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(uris.contains(&"test://static-text"), "{listed}");
    assert!(
        uris.iter().all(|u| u.starts_with("test://static-")),
        "{listed}"
    );
    assert!(
        listed.to_string().contains("Static text, as declared"),
        "{listed}"
    );

    let read = inspector(
        KEY,
        &["--method", "resources/read", "--uri", "test://static-text"],
    );
    assert_eq!(read.code, Some(0), "{}\n{}", read.stderr, gw.log());
    let contents = &read.json()["result"]["contents"][0];
    assert_eq!(contents["uri"], "test://static-text", "{contents}");
    assert!(
        contents["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{contents}"
    );

    let prompts = inspector(KEY, &["--method", "prompts/list"]);
    assert_eq!(prompts.code, Some(0), "{}", prompts.stderr);
    let prompts = prompts.json();
    assert!(
        prompts.to_string().contains("A greeting, as declared"),
        "{prompts}"
    );
    assert!(
        !prompts.to_string().contains("test_prompt_with_arguments"),
        "{prompts}"
    );

    let greeting = inspector(
        KEY,
        &[
            "--method",
            "prompts/get",
            "--prompt-name",
            "greeting",
            "--prompt-args",
            "arg1=park",
            "arg2=joe",
        ],
    );
    assert_eq!(greeting.code, Some(0), "{}\n{}", greeting.stderr, gw.log());
    let messages = greeting.json()["result"]["messages"].to_string();
    assert!(
        messages.contains("park") && messages.contains("joe"),
        "{messages}"
    );

    for (key, args) in [
        (
            BOB,
            vec!["--method", "resources/read", "--uri", "test://static-text"],
        ),
        (
            KEY,
            vec!["--method", "resources/read", "--uri", "test://undeclared"],
        ),
        (
            KEY,
            vec![
                "--method",
                "prompts/get",
                "--prompt-name",
                "greeting",
                "--prompt-args",
                "arg1=zoo",
                "arg2=joe",
            ],
        ),
    ] {
        let refused = inspector(key, &args);
        assert_ne!(refused.code, Some(0), "{args:?}: {}", refused.stdout);
        assert!(
            !refused.stdout.contains("\"contents\""),
            "{args:?}: {}",
            refused.stdout
        );
    }
}
