//! docker/nginx.conf in front of two real gateway replicas, with Debian's nginx: requests of a
//! legacy session stick to the replica that holds the session, while stateless 2026-07-28 calls
//! (and `initialize`) are spread over both.

use crate::common;

use common::{
    Gateway, KEY, Nginx, Raw, callers, demo_stdio_config, echo_tool, receipts_json,
    stateless_call_body, stateless_call_headers,
};
use serde_json::json;

const SESSIONS: usize = 8;
const CALLS_PER_SESSION: usize = 5;
const STATELESS_CALLS: usize = 24;

fn replica() -> Gateway {
    let contract = common::contract_file(
        "demo",
        &[
            &echo_tool("echo", 40, ""),
            &echo_tool("stateless_echo", 40, ""),
        ],
    );
    Gateway::start(
        &demo_stdio_config(&callers(&[]), ""),
        &[("demo.yaml", contract.as_str())],
    )
}

/// Proves: through docker/nginx.conf, every request of each of 8 sessions reaches the replica
/// that opened it (the replicas share no state here, so a request routed to the other one would
/// be answered 404 "session not found"), and each session's calls are all on one replica's
/// receipts; stateless calls, which carry no session id, reach both replicas (with a consistent
/// hash of the empty header they would all go to one).
#[tokio::test]
async fn sessions_stick_to_their_replica_and_stateless_calls_reach_both() {
    let replicas = [replica(), replica()];
    let nginx = Nginx::start(&[&replicas[0], &replicas[1]]);
    let raw = Raw::new(&nginx.url());

    for s in 0..SESSIONS {
        let session = raw.open_session(Some(KEY), "2025-06-18").await;
        for c in 0..CALLS_PER_SESSION {
            let message = format!("session {s} call {c}");
            let params = json!({"name": "echo", "arguments": {"message": message}});
            let reply = raw
                .request(Some(KEY), &session, "2025-06-18", "tools/call", params)
                .await;
            assert_eq!(
                reply.status, 200,
                "call {c} of session {s} left its replica: {reply:?}"
            );
            assert!(reply.body.contains(&message), "{reply:?}");
        }
    }

    for i in 0..STATELESS_CALLS {
        let headers = stateless_call_headers(KEY, "stateless_echo");
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = stateless_call_body(json!(i), "stateless_echo", json!({"message": "hi"}));
        let reply = raw.post(&headers, &body.to_string()).await;
        assert_eq!(reply.status, 200, "{reply:?}");
        assert!(reply.body.contains("hi"), "{reply:?}");
    }

    let receipts = |gw: &Gateway, tool: &str| receipts_json(&gw.config_path(), &["--tool", tool]);
    let session_receipts: Vec<usize> = replicas
        .iter()
        .map(|gw| receipts(gw, "echo").len())
        .collect();
    assert_eq!(
        session_receipts.iter().sum::<usize>(),
        SESSIONS * CALLS_PER_SESSION
    );
    assert!(
        session_receipts.iter().all(|n| n % CALLS_PER_SESSION == 0),
        "each replica served whole sessions: {session_receipts:?}"
    );
    let stateless: Vec<usize> = replicas
        .iter()
        .map(|gw| receipts(gw, "stateless_echo").len())
        .collect();
    assert_eq!(stateless.iter().sum::<usize>(), STATELESS_CALLS);
    assert!(
        stateless.iter().all(|&n| n > 0),
        "stateless calls reached both replicas: {stateless:?}"
    );
}
