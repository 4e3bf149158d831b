//! Reload: a changed configuration or contracts directory, or SIGHUP, puts a new
//! version in force after checking it whole; an invalid one is refused and the running version
//! keeps serving; calls in flight finish under the version they started with; no call is lost.

use crate::common;

use std::time::Duration;

use common::{
    BOB, Gateway, KEY, call, call_ok, callers, client, demo_stdio_config, text_of, wait_for_counts,
};
use serde_json::{Value, json};

/// alice may call every tool; with `with_bob`, bob may call `echo`.
fn config(with_bob: bool) -> String {
    let bob: &[_] = if with_bob {
        &[("bob", BOB, "[echo]")]
    } else {
        &[]
    };
    demo_stdio_config(&callers(bob), "")
}

const ECHO_AND_SLOW: &str = "upstream: demo\ntools:\n  echo:\n    privilege: read\n    input: {type: object, properties: {message: {type: string}}, required: [message]}\n  slow:\n    privilege: read\n    timeout: 10s\n    input: {type: object, properties: {ms: {type: integer}}, required: [ms]}\n  peek_counter:\n    privilege: read\n";
const ECHO_ONLY: &str = "upstream: demo\ntools:\n  echo:\n    privilege: read\n    input: {type: object, properties: {message: {type: string}}, required: [message]}\n";
const ADD: &str = "upstream: demo\ntools:\n  add:\n    privilege: read\n    input: {type: object, properties: {a: {type: number}, b: {type: number}}, required: [a, b]}\n";

/// Proves: a new contract file is picked up without a restart: its tool appears and works, and
/// tools of an unchanged contract keep working on the same upstream connection.
#[tokio::test]
async fn a_changed_contracts_directory_is_reloaded() {
    let gw = Gateway::start(&config(false), &[("demo.yaml", ECHO_ONLY)]);
    let alice = client(&gw.url, KEY).await;
    assert!(call(&alice, "add", json!({"a": 1, "b": 2})).await.is_err());
    gw.write_file("contracts/add.yaml", ADD);
    gw.wait_for(Duration::from_secs(15), "add enabled", |r| {
        r["tools"]["add"]["state"] == "enabled"
    });
    let r = call(&alice, "add", json!({"a": 1, "b": 2}))
        .await
        .expect("add after reload");
    assert_eq!(r.structured_content, Some(json!({"sum": 3})));
    call_ok(&alice, "echo", json!({"message": "same session"})).await;
    assert!(gw.log().contains("configuration reloaded"), "{}", gw.log());
}

/// Proves: an invalid new version is refused with a logged error and the running version keeps
/// serving unchanged.
#[tokio::test]
async fn an_invalid_version_is_refused_and_the_old_one_keeps_serving() {
    let gw = Gateway::start(&config(false), &[("demo.yaml", ECHO_ONLY)]);
    let alice = client(&gw.url, KEY).await;
    gw.write_file(
        "contracts/broken.yaml",
        "upstream: demo\ntools:\n  bad:\n    privlege: read\n",
    );
    gw.retry_until(Duration::from_secs(15), "a logged refusal", async || {
        if gw.log().contains("reload refused") {
            Ok(())
        } else {
            Err("no `reload refused` in the log".into())
        }
    })
    .await;
    assert!(
        gw.log().contains("privlege"),
        "the refusal names the bad key:\n{}",
        gw.log()
    );
    call_ok(&alice, "echo", json!({"message": "still"})).await;
    let broken_config = "upstreams: {}\ncallers: [{name: x}]\n";
    gw.write_file("narrowgate.yaml", broken_config);
    gw.retry_until(
        Duration::from_secs(15),
        "the broken config's refusal",
        async || match gw.log().matches("reload refused").count() {
            2.. => Ok(()),
            n => Err(format!("{n} `reload refused` in the log")),
        },
    )
    .await;
    let r = call(&alice, "echo", json!({"message": "still"}))
        .await
        .expect("echo");
    assert_ne!(
        r.is_error,
        Some(true),
        "a broken config must not replace the running one"
    );
}

/// Proves: SIGHUP reloads the configuration file: a caller added to it can connect afterwards.
#[tokio::test]
async fn sighup_reloads_the_configuration() {
    let gw = Gateway::start(&config(false), &[("demo.yaml", ECHO_ONLY)]);
    let raw = common::Raw::new(&gw.url);
    let init = common::initialize_body("2025-11-25");
    let bob = format!("Bearer {BOB}");
    assert_eq!(
        raw.post(&[("authorization", &bob)], &init).await.status,
        401
    );
    // Same size and second as before would not be noticed by polling: SIGHUP must do it.
    gw.write_file(
        "narrowgate.yaml",
        &format!("contracts: contracts\n{}", config(true)),
    );
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gw.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    gw.retry_until(Duration::from_secs(15), "bob's admission", async || {
        let reply = raw.post(&[("authorization", &bob)], &init).await;
        match reply.status {
            200 => Ok(()),
            _ => Err(format!("bob still refused: {reply:?}")),
        }
    })
    .await;
}

/// Proves: a call in flight finishes under the version it started with, even when the reload
/// removes its tool; new calls see the new version.
#[tokio::test]
async fn calls_in_flight_finish_under_their_version() {
    let gw = Gateway::start(&config(false), &[("demo.yaml", ECHO_AND_SLOW)]);
    let alice = client(&gw.url, KEY).await;
    let url = gw.url.clone();
    let in_flight = tokio::spawn(async move {
        let c = client(&url, KEY).await;
        call(&c, "slow", json!({"ms": 2000})).await
    });
    wait_for_counts(
        &alice,
        Duration::from_secs(10),
        "the slow call under way",
        |counts| counts.running == 1,
    )
    .await;
    gw.write_file("contracts/demo.yaml", ECHO_ONLY);
    gw.wait_for_async(Duration::from_secs(15), "slow removed", |r| {
        r["tools"].get("slow").is_none()
    })
    .await;
    let e = call(&alice, "slow", json!({"ms": 1}))
        .await
        .expect_err("slow is gone for new calls");
    assert!(e.contains("Unknown tool: slow"), "{e}");
    let r = in_flight
        .await
        .expect("task")
        .expect("the in-flight call is answered");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(text_of(&r).contains("slept 2000"));
}

/// Proves: reloads under a steady load of calls lose none and answer none with an error.
#[tokio::test]
async fn reloads_under_load_lose_no_call() {
    let gw = Gateway::start(&config(false), &[("demo.yaml", ECHO_ONLY)]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for worker in 0..4 {
        let url = gw.url.clone();
        let stop = stop.clone();
        load.push(tokio::spawn(async move {
            let c = client(&url, KEY).await;
            let (mut calls, mut failures) = (0, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                calls += 1;
                match call(&c, "echo", json!({"message": format!("{worker}-{calls}")})).await {
                    Ok(r) if r.is_error != Some(true) => {}
                    other => failures.push(format!("{other:?}")),
                }
            }
            (calls, failures)
        }));
    }
    for round in 0..5 {
        let text = if round % 2 == 0 {
            ADD
        } else {
            "upstream: demo\ntools: {}\n"
        };
        gw.write_file("contracts/add.yaml", text);
        let added = round % 2 == 0;
        gw.wait_for_async(Duration::from_secs(15), "the reload in force", |r| {
            let add = &r["tools"]["add"];
            if added {
                add["state"] == "enabled"
            } else {
                add.is_null()
            }
        })
        .await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut calls, mut failures) = (0, Vec::new());
    for task in load {
        let (n, f) = task.await.expect("load task");
        calls += n;
        failures.extend(f);
    }
    assert!(
        calls > 100,
        "too little load to prove anything: {calls} calls"
    );
    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed, first: {:?}",
        failures.len(),
        failures.first()
    );
    assert!(
        gw.log().matches("configuration reloaded").count() >= 3,
        "{}",
        gw.log()
    );
}

/// Proves: rate limits survive a reload that leaves `state` alone: a caller who used up a
/// tool's budget is still refused after an unrelated change is reloaded (a reload must not hand
/// out a fresh burst), while a rate the new version changes takes effect at once.
#[tokio::test]
async fn rate_limits_survive_a_reload() {
    let limited = |rate: &str| {
        format!(
            "upstream: demo\ntools:\n  echo:\n    privilege: read\n    rate: {rate}\n    input: {{type: object, properties: {{message: {{type: string}}}}, required: [message]}}\n"
        )
    };
    let gw = Gateway::start(&config(false), &[("demo.yaml", &limited("1/m"))]);
    let alice = client(&gw.url, KEY).await;
    let refused = |r: &rmcp::model::CallToolResult| {
        r.is_error == Some(true) && text_of(r).contains("rate limit")
    };
    let first = common::call_answered(&alice, "echo", json!({"message": "one"})).await;
    assert!(!refused(&first), "{first:?}");
    let second = common::call_answered(&alice, "echo", json!({"message": "two"})).await;
    assert!(refused(&second), "the budget is 1/m: {second:?}");

    gw.write_file("contracts/add.yaml", ADD);
    gw.wait_for(Duration::from_secs(15), "add enabled", |r| {
        r["tools"]["add"]["state"] == "enabled"
    });
    let after = common::call_answered(&alice, "echo", json!({"message": "three"})).await;
    assert!(
        refused(&after),
        "a reload handed out a fresh budget: {after:?}"
    );

    // A new rate is a new limit: it applies to the next call.
    gw.write_file("contracts/demo.yaml", &limited("100/s"));
    gw.retry_until(
        Duration::from_secs(15),
        "the new rate in force",
        async || {
            let r = common::call_answered(&alice, "echo", json!({"message": "four"})).await;
            if refused(&r) {
                Err(format!("{r:?}"))
            } else {
                Ok(())
            }
        },
    )
    .await;
}

/// A request sent in two halves over its own connection: its head (with `Expect:
/// 100-continue`) first, its body when [`finish`](Self::finish) is called.
struct HeldRequest {
    stream: tokio::net::TcpStream,
    body: String,
}

impl HeldRequest {
    /// Sends the head of a stateless 2026-07-28 POST of `body` (JSON-RPC `method`, on `name`) as
    /// the caller with `key`, then waits until the gateway reads the body (hyper answers `100
    /// Continue` at its first read, which comes after the request was admitted).
    async fn start(gw: &Gateway, key: &str, accept: &str, method: &str, body: Value) -> Self {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let address = gw.base.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect to the gateway");
        let name = body["params"]["name"]
            .as_str()
            .map(|n| format!("mcp-name: {n}\r\n"))
            .unwrap_or_default();
        let body = body.to_string();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {key}\r\n\
             accept: {accept}\r\ncontent-type: application/json\r\n\
             mcp-protocol-version: 2026-07-28\r\nmcp-method: {method}\r\n{name}\
             content-length: {}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.expect("send head");
        let mut seen = Vec::new();
        let mut buffer = [0u8; 256];
        while !String::from_utf8_lossy(&seen).contains("\r\n\r\n") {
            let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
                .await
                .expect("100 Continue within 10 s")
                .expect("read");
            assert!(
                n > 0,
                "connection closed: {}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buffer[..n]);
        }
        let seen = String::from_utf8_lossy(&seen);
        assert!(
            seen.starts_with("HTTP/1.1 100"),
            "not a 100 Continue: {seen}"
        );
        HeldRequest { stream, body }
    }

    /// Sends the body; the answer's status and JSON body.
    async fn finish(mut self) -> (u16, Value) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        self.stream
            .write_all(self.body.as_bytes())
            .await
            .expect("send body");
        let mut answer = Vec::new();
        tokio::time::timeout(
            Duration::from_secs(20),
            self.stream.read_to_end(&mut answer),
        )
        .await
        .expect("an answer within 20 s")
        .expect("read the answer");
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let status = answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {answer}"));
        let (_, body) = answer.split_once("\r\n\r\n").unwrap_or_default();
        // Chunked or not, the JSON is between the first `{` and the last `}`.
        let json = match (body.find('{'), body.rfind('}')) {
            (Some(a), Some(b)) if a < b => {
                serde_json::from_str(&body[a..=b]).unwrap_or(Value::Null)
            }
            _ => Value::Null,
        };
        (status, json)
    }
}

fn stateless_request(method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "reload-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// Proves: a request is checked and served by the version in force when it arrived, even when
/// a reload puts another in force between its layers (here: while its body is being read, after
/// admission and authentication, before the scope check and the handlers). Version A has bob and `echo`;
/// version B has neither (only `add`). Requests admitted under A and finished under B are
/// authenticated by A (bob is let in), answered by A's catalog on the direct path (`echo`
/// runs) and in rmcp's handler (`tools/call` with an `Accept` the direct path leaves to rmcp,
/// and `tools/list`, which lists A's tools). New requests then get B.
#[tokio::test]
async fn a_reload_between_layers_does_not_split_a_request() {
    let gw = Gateway::start(&config(true), &[("demo.yaml", ECHO_ONLY)]);
    const PLAIN: &str = "application/json, text/event-stream";
    const TO_RMCP: &str = "application/json;q=1, text/event-stream";
    let echo = || {
        stateless_request(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "A"}}),
        )
    };
    let held = [
        HeldRequest::start(&gw, KEY, PLAIN, "tools/call", echo()).await,
        HeldRequest::start(&gw, KEY, TO_RMCP, "tools/call", echo()).await,
        HeldRequest::start(&gw, BOB, PLAIN, "tools/call", echo()).await,
        HeldRequest::start(
            &gw,
            KEY,
            PLAIN,
            "tools/list",
            stateless_request("tools/list", json!({})),
        )
        .await,
    ];
    // Version B: bob gone, `echo` gone, `add` in.
    gw.write_file(
        "narrowgate.yaml",
        &format!("contracts: contracts\n{}", config(false)),
    );
    std::fs::remove_file(gw.config_dir().join("contracts/demo.yaml")).expect("remove demo.yaml");
    gw.write_file("contracts/add.yaml", ADD);
    gw.wait_for(Duration::from_secs(15), "version B in force", |r| {
        r["tools"]["add"]["state"] == "enabled" && r["tools"].get("echo").is_none()
    });
    let [direct, by_rmcp, bob, list] = held;
    for (what, request) in [
        ("direct path", direct),
        ("rmcp's handler", by_rmcp),
        ("bob", bob),
    ] {
        let (status, answer) = request.finish().await;
        assert_eq!(status, 200, "{what}: {answer}");
        assert_eq!(
            answer["result"]["content"][0]["text"], "Echo: A",
            "{what} was not served by the version it was admitted under: {answer}"
        );
    }
    let (status, answer) = list.finish().await;
    assert_eq!(status, 200, "{answer}");
    let names: Vec<&str> = answer["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["echo"], "tools/list of version A: {answer}");

    // New requests are admitted under B: bob is refused from his headers alone (401 before any
    // 100 Continue: the body of an unauthenticated request is never read).
    let bob_auth = format!("Bearer {BOB}");
    let reply = common::Raw::new(&gw.url)
        .post(
            &[
                ("authorization", &bob_auth),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
            ],
            &echo().to_string(),
        )
        .await;
    assert_eq!(reply.status, 401, "bob under version B: {reply:?}");
    let (status, answer) = HeldRequest::start(&gw, KEY, PLAIN, "tools/call", echo())
        .await
        .finish()
        .await;
    assert_eq!(status, 200);
    assert!(
        answer["result"]["isError"] == true || answer.get("error").is_some(),
        "echo under version B: {answer}"
    );
}

/// Proves: `max_request_bytes` follows reloads for every request, those rmcp serves included
/// (rmcp's own limit, fixed when it starts, is off): an `initialize` of ~5 KB is refused under a
/// 2 KiB limit, served once the limit is raised, and refused again once it is lowered, with the
/// limit in force named in the 413.
#[tokio::test]
async fn the_body_limit_follows_reloads() {
    let limit = |size: &str| format!("{}max_request_bytes: {size}\n", config(false));
    let gw = Gateway::start(&limit("2KiB"), &[("demo.yaml", ECHO_ONLY)]);
    let raw = common::Raw::new(&gw.url);
    let auth = format!("Bearer {KEY}");
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "x".repeat(5000), "version": "1"}}})
    .to_string();
    let reply = raw.post(&[("authorization", &auth)], &initialize).await;
    assert_eq!(reply.status, 413, "{reply:?}");
    assert!(reply.body.contains("(2048 bytes)"), "{reply:?}");

    let reloads = |gw: &Gateway| gw.log().matches("configuration reloaded").count();
    for (size, status, named) in [("64KiB", 200, ""), ("1KiB", 413, "(1024 bytes)")] {
        let before = reloads(&gw);
        gw.write_file(
            "narrowgate.yaml",
            &format!("contracts: contracts\n{}", limit(size)),
        );
        gw.retry_until(Duration::from_secs(15), "a reload", async || {
            match reloads(&gw) > before {
                true => Ok(()),
                false => Err("not reloaded yet".to_string()),
            }
        })
        .await;
        let reply = raw.post(&[("authorization", &auth)], &initialize).await;
        assert_eq!(reply.status, status, "under {size}: {reply:?}");
        assert!(reply.body.contains(named), "under {size}: {reply:?}");
    }
}
