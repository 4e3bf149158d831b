//! The JSON-RPC request parser and the direct path's qualifier: which requests the gateway
//! answers itself instead of handing them to rmcp.
//!
//! Input: one byte choosing the request's headers (method, session or stateless, protocol
//! version, `Accept`, `Content-Type`, `Mcp-Name`, extra headers), then the body.
//! Checks: no panic; and a request the direct path takes is one rmcp itself parses as a
//! `tools/call` request (the path only answers what rmcp would accept as it is).
#![no_main]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use http::{HeaderMap, HeaderValue, Method};
use libfuzzer_sys::fuzz_target;
use narrowgate::harness::ContractSet;
use narrowgate::harness::Catalog;
use narrowgate::harness::{Snapshot, Status};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};

/// The contracts of the repository's demo upstream, published as they are (the upstream not
/// connected yet), so `echo`, `add` and `get_weather` qualify.
fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut contracts = ContractSet::default();
        let text = include_str!("../../contracts/demo.yaml");
        if let Err(e) = contracts.add_yaml(Path::new("demo.yaml"), text) {
            panic!("the demo contracts load: {e}");
        }
        let snapshot = Snapshot {
            status: Status::Starting,
            tools: Arc::new(Vec::new()),
            protocol: None,
        };
        Catalog::build(
            &contracts,
            &BTreeMap::from([("demo".to_string(), snapshot)]),
        )
    })
}

fn headers(choice: u8) -> (Method, HeaderMap) {
    let bit = |n: u8| choice & (1 << n) != 0;
    let method = if bit(0) && bit(1) && bit(2) {
        Method::GET
    } else {
        Method::POST
    };
    let mut headers = HeaderMap::new();
    let mut put = |name: &'static str, value: &'static str| {
        headers.append(name, HeaderValue::from_static(value));
    };
    put(
        "content-type",
        if bit(3) && bit(4) {
            "text/plain"
        } else {
            "application/json"
        },
    );
    put(
        "accept",
        if bit(5) && bit(6) {
            "application/json"
        } else {
            "application/json, text/event-stream"
        },
    );
    if bit(7) {
        // A session's request (2025-11-25 or 2025-06-18).
        put("mcp-session-id", "s-1");
        put(
            "mcp-protocol-version",
            if bit(1) { "2025-06-18" } else { "2025-11-25" },
        );
        if bit(4) && bit(5) {
            put("mcp-session-id", "s-2");
        }
    } else {
        put("mcp-protocol-version", "2026-07-28");
        put("mcp-method", "tools/call");
        put("mcp-name", if bit(2) && bit(3) { "add" } else { "echo" });
        if bit(5) && bit(4) && !bit(6) {
            put("mcp-param-region", "eu");
        }
    }
    (method, headers)
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let (method, headers) = headers(choice);
    let rmcp_parse = serde_json::from_slice::<ClientJsonRpcMessage>(body);
    if narrowgate::harness::direct_call_qualifies(catalog(), &method, &headers, body) {
        let is_call = matches!(
            &rmcp_parse,
            Ok(JsonRpcMessage::Request(r)) if matches!(r.request, ClientRequest::CallToolRequest(_))
        );
        assert!(
            is_call,
            "the direct path took a body rmcp reads as {rmcp_parse:?}: {}",
            String::from_utf8_lossy(body)
        );
    }
});
