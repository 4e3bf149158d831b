//! The step-up flow (MCP authorization 2025-11-25): a caller lacking a tool's scopes gets HTTP 403
//! `insufficient_scope`, checked raw and through the official Python SDK.

use serde_json::{Value, json};

use super::common::peers::{CLIENT_DEADLINE, PyClient, py_client_script, py2_python};
use super::common::process::run;
use super::common::{self, KEY, Raw, http_get};
use super::support::{AUDIENCE, RESOURCE_METADATA, assert_challenge, keys};
use super::{BOB, HttpUpstream, V, call, call_once, listed, start_with_file, token};

/// Proves: a caller that may use a tool but lacks its scopes sees it listed and gets HTTP 403
/// `insufficient_scope` naming the scope (tokens and API keys alike); with the scope (`scope` or
/// `scp`) the call goes through; a caller not allowed the tool gets "Unknown tool", not a 403.
/// Each 403 leaves a `denied` receipt with the refused arguments, whichever path (the gateway's
/// own, or rmcp's for a 2025-03-26 session) would have served the call.
#[tokio::test]
async fn step_up_403_names_the_missing_scope() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "receipts: { store_arguments: true }");
    let raw = Raw::new(&gw.url);
    let k = keys();
    let without = token(
        &k.rsa,
        "stepper",
        json!({"groups": ["weather"], "scope": "profile"}),
    );
    assert_eq!(
        listed(&raw, &without).await,
        ["echo", "get_weather", "whoami"]
    );
    for credential in [without.as_str(), BOB] {
        let session = raw.open_session(Some(credential), V).await;
        let reply = call(
            &raw,
            credential,
            &session,
            "get_weather",
            json!({"location": "Chicago"}),
        )
        .await;
        assert_eq!(reply.status, 403, "{reply:?}");
        let start = "Bearer error=\"insufficient_scope\", scope=\"weather:read\"";
        assert_challenge(&reply, start, "the step-up 403");
        // Other tools stay usable in the same session.
        let echo = call(&raw, credential, &session, "echo", json!({"message": "hi"})).await;
        assert_eq!(echo.status, 200, "{echo:?}");
    }
    // A 2025-03-26 session's call is rmcp's to serve, so the HTTP layer read only the tool's name
    // of it: the refusal's receipt reads the arguments from the body again.
    let old = "2025-03-26";
    let session = raw.open_session(Some(BOB), old).await;
    let params = json!({"name": "get_weather", "arguments": {"location": "New York"}});
    let reply = raw
        .request(Some(BOB), &session, old, "tools/call", params)
        .await;
    assert_eq!(reply.status, 403, "{reply:?}");
    // Each refusal left a `denied` receipt with the arguments it was refused with.
    let refused: Vec<Value> = common::receipts_json(&gw.config_path(), &["--outcome", "denied"])
        .into_iter()
        .filter(|r| r["tool"] == "get_weather")
        .collect();
    let mut arguments: Vec<String> = refused.iter().map(|r| r["arguments"].to_string()).collect();
    arguments.sort();
    assert_eq!(
        arguments,
        [
            r#"{"location":"Chicago"}"#,
            r#"{"location":"Chicago"}"#,
            r#"{"location":"New York"}"#
        ],
        "{refused:?}"
    );
    for credential in [
        token(
            &k.rsa,
            "stepper",
            json!({"groups": ["weather"], "scope": "profile weather:read"}),
        ),
        token(
            &k.ec,
            "stepper",
            json!({"groups": ["weather"], "scp": ["weather:read"]}),
        ),
        KEY.to_string(),
    ] {
        let message = call_once(
            &raw,
            &credential,
            "get_weather",
            json!({"location": "Chicago"}),
        )
        .await;
        assert_eq!(message["result"]["isError"], json!(false), "{message}");
    }
    let outsider = token(&k.rsa, "outsider", json!({}));
    let message = call_once(
        &raw,
        &outsider,
        "get_weather",
        json!({"location": "Chicago"}),
    )
    .await;
    assert_eq!(message["error"]["code"], -32602, "{message}");
}

/// Proves: the step-up flow through a real client, the official Python SDK: listing works, the
/// call without the scope fails on the 403, and a token with the scope then succeeds.
#[tokio::test]
async fn step_up_through_the_python_sdk() {
    let upstream = HttpUpstream::start(&[]);
    let (gw, _dir) = start_with_file(&upstream, "");
    let k = keys();
    let steps = json!([{"op": "list"}, {"op": "call", "name": "get_weather", "arguments": {"location": "Chicago"}}]);
    let run_steps = |credential: &str| PyClient::V2("legacy").run(&gw.url, credential, &steps);
    let without = run_steps(&token(&k.rsa, "py", json!({"groups": ["weather"]})));
    let names: Vec<&str> = without["results"][0]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{without}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"get_weather"), "{without}");
    let refused = &without["results"][1];
    assert!(
        refused.get("error").is_some() || refused.get("exception").is_some(),
        "{without}"
    );
    assert!(
        refused.get("is_error").is_none(),
        "the 403 is not a tool result: {without}"
    );
    let with = run_steps(&token(
        &k.rsa,
        "py",
        json!({"groups": ["weather"], "scope": "weather:read"}),
    ));
    assert_eq!(with["results"][1]["is_error"], json!(false), "{with}");
    assert!(gw.log().contains("403 insufficient_scope"), "{}", gw.log());

    // The SDK's own OAuth helpers read our 403 and 401 challenges and our RFC 9728 document the
    // way its step-up flow will.
    let raw = Raw::new(&gw.url);
    let t = token(&k.rsa, "py", json!({"groups": ["weather"]}));
    let session = raw.open_session(Some(&t), V).await;
    let forbidden = call(
        &raw,
        &t,
        &session,
        "get_weather",
        json!({"location": "Chicago"}),
    )
    .await;
    let unauthorized = raw
        .post(&[], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .await;
    let (_, metadata) =
        http_get(&gw.base, "/.well-known/oauth-protected-resource/mcp").expect("metadata");
    let parse = r#"
import json, sys
from httpx2 import Response
from mcp.client.auth.utils import extract_field_from_www_auth as field, extract_resource_metadata_from_www_auth as rm
from mcp.shared.auth import ProtectedResourceMetadata
out = {}
for status, header in ((403, sys.argv[1]), (401, sys.argv[2])):
    r = Response(status, headers={"WWW-Authenticate": header})
    out[str(status)] = {"error": field(r, "error"), "scope": field(r, "scope"), "resource_metadata": rm(r)}
prm = ProtectedResourceMetadata.model_validate_json(sys.argv[3])
out["prm"] = {"resource": str(prm.resource), "authorization_servers": [str(u) for u in prm.authorization_servers]}
print(json.dumps(out))
"#;
    let out = run(
        std::process::Command::new(py2_python())
            .args(["-c", parse])
            .arg(forbidden.header("www-authenticate").unwrap_or_default())
            .arg(unauthorized.header("www-authenticate").unwrap_or_default())
            .arg(&metadata),
        CLIENT_DEADLINE,
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let parsed = out.json();
    let metadata_url = RESOURCE_METADATA;
    assert_eq!(
        parsed["403"],
        json!({"error": "insufficient_scope", "scope": "weather:read", "resource_metadata": metadata_url})
    );
    assert_eq!(
        parsed["401"],
        json!({"error": null, "scope": "weather:read", "resource_metadata": metadata_url})
    );
    assert_eq!(parsed["prm"]["resource"], AUDIENCE);
    assert_eq!(
        parsed["prm"]["authorization_servers"],
        json!(["https://as.test"])
    );
}

/// Proves: the whole step-up flow with the Python SDK as the OAuth client: from the 401's
/// `resource_metadata` it finds our RFC 9728 document and the authorization server, gets a token
/// without the tool's scope, receives the 403 `insufficient_scope` on the call, re-authorizes for
/// the scope the challenge names, and the retried call succeeds.
#[tokio::test]
async fn the_python_sdk_steps_up_by_itself() {
    let upstream = HttpUpstream::start(&[]);
    let authorization_server =
        super::support::authorization_server("py-oauth", json!({"groups": ["weather"]}));
    let dir = tempfile::tempdir().expect("tempdir");
    let jwks_path = dir.path().join("jwks.json");
    std::fs::write(&jwks_path, super::support::jwks(&[&keys().rsa])).expect("write jwks");
    // No public_url: the metadata URL is then built from the Host the client used.
    let config = super::config(
        &upstream.url,
        &format!("jwks_file: {}", jwks_path.display()),
        "",
    )
    .replace(&format!("public_url: {AUDIENCE}\n"), "")
    .replace(
        "  issuer: https://idp.test\n",
        &format!("  issuer: https://idp.test\n  audience: {AUDIENCE}\n"),
    )
    .replace("https://as.test", &authorization_server.base);
    let gw = common::Gateway::start(&config, &[("demo.yaml", super::contracts().as_str())]);
    let out = run(
        std::process::Command::new(py2_python())
            .arg(py_client_script("py2_oauth_client.py"))
            .arg(&gw.url),
        CLIENT_DEADLINE,
    );
    assert_eq!(out.code, Some(0), "{}\nlog:\n{}", out.stderr, gw.log());
    let result = out.json();
    assert_eq!(
        result["tools"],
        json!(["echo", "get_weather", "whoami"]),
        "{result}"
    );
    assert_eq!(
        result["call"]["is_error"],
        json!(false),
        "{result}\nlog:\n{}",
        gw.log()
    );
    let asked: Vec<&str> = result["authorizations"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|a| a["scope"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        asked.len(),
        2,
        "one authorization, then one step-up: {result}"
    );
    assert!(asked[1].split(' ').any(|s| s == "weather:read"), "{result}");
    assert!(gw.log().contains("403 insufficient_scope"), "{}", gw.log());
}
