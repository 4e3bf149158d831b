//! The gateway against a hostile upstream (`tests/hostile`): whatever an upstream sends, the
//! gateway's resources stay bounded, `/healthz` keeps answering, and nothing outside the contract
//! reaches the upstream.

mod common;

use std::path::Path;

use common::{
    Gateway, HostileHttp, KEY, call_ok, callers, client, hostile_stdio_upstream, text_of,
};
use serde_json::json;

const CONTRACT: &str = r#"upstream: hostile
tools:
  echo:
    privilege: read
    input: { type: object, properties: { text: { type: string } }, required: [text] }
  fresh:
    privilege: read
"#;

/// How the hostile upstream is reached in a test.
#[derive(Clone, Copy, Debug)]
enum Via {
    Stdio,
    Http,
}

/// A gateway in front of the hostile upstream (over `via`) with `attacks` and `extra` arguments,
/// recording to `record`; the HTTP upstream's process, if any, lives as long as the gateway.
fn gateway(
    via: Via,
    attacks: &[&str],
    extra: &[&str],
    record: &Path,
) -> (Gateway, Option<HostileHttp>) {
    let (entry, http) = match via {
        Via::Stdio => (
            hostile_stdio_upstream("hostile", attacks, record, extra),
            None,
        ),
        Via::Http => {
            let upstream = HostileHttp::start(attacks, record, extra);
            (upstream.config("hostile"), Some(upstream))
        }
    };
    let config = format!("upstreams:\n{entry}{}", callers(&[]));
    (Gateway::start(&config, &[("hostile.yaml", CONTRACT)]), http)
}

/// Proves: with no attack the hostile upstream is an ordinary upstream, over stdio and HTTP (so
/// the tests below fail for the attack, not for the harness).
#[tokio::test]
async fn without_an_attack_it_is_an_ordinary_upstream() {
    for via in [Via::Stdio, Via::Http] {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("record.jsonl");
        let (gw, _upstream) = gateway(via, &[], &[], &record);
        let c = client(&gw.url, KEY).await;
        let r = call_ok(&c, "echo", json!({"text": "hello"})).await;
        assert_eq!(text_of(&r), "hello", "{via:?}");
    }
}
