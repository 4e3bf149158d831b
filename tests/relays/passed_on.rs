//! A stateless client's answer that reaches another replica than the one that parked its call
//! (`relay::holders`): two gateways sharing Redis in front of one upstream.

use serde_json::{Value, json};

use super::requests::{BOB_KEY, CONTRACT, stateless};
use crate::common::raw::result_text;
use crate::common::{Gateway, KEY, Redis, callers, receipts_json, upstream::HttpUpstream};

/// A gateway in front of `upstream` sharing its state through Redis at `port`.
fn replica(upstream: &HttpUpstream, port: u16) -> Gateway {
    let config = format!(
        "upstreams:\n  demo:\n    url: {}\n{}state: redis://127.0.0.1:{port}\n",
        upstream.url,
        callers(&[("bob", BOB_KEY, "['*']")])
    );
    let gateway = Gateway::start(&config, &[("demo.yaml", CONTRACT)]);
    gateway.wait_tools_joined("demo", &["test_elicitation"]);
    gateway
}

fn accepted(state: &str) -> Value {
    json!({"requestState": state, "inputResponses": {"upstream-1": {
        "action": "accept", "content": {"username": "ada", "email": "ada@example.com"}}}})
}

fn state_of(asked: &Value) -> String {
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    asked["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_string()
}

/// Proves: a call parked on replica A is completed by the client's answer sent to replica B
/// (B finds A in Redis and passes the request on; A checks it and answers), and the call runs
/// once, on A. The state keeps its rules across replicas: another caller's answer through B is
/// refused and does not cost the owner the call, and a replay through B is refused. Fails
/// without the passing on (B answered "requestState names no call").
#[tokio::test]
async fn an_answer_sent_to_another_replica_reaches_the_parked_call() {
    let redis = Redis::start();
    let upstream = HttpUpstream::start(&[]);
    let a = replica(&upstream, redis.port);
    let b = replica(&upstream, redis.port);
    let who = json!({"message": "who are you?"});
    let elicit =
        |gateway, key, extra| stateless(gateway, key, "test_elicitation", who.clone(), extra);

    let state = state_of(&elicit(&a, KEY, json!({})).await);
    let by_bob = elicit(&b, BOB_KEY, accepted(&state)).await;
    assert_eq!(by_bob["error"]["code"], -32602, "another caller: {by_bob}");
    let answered = elicit(&b, KEY, accepted(&state)).await;
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    assert!(
        result_text(&answered["result"]).contains("ada@example.com"),
        "{answered}"
    );
    let replayed = elicit(&b, KEY, accepted(&state)).await;
    assert_eq!(replayed["error"]["code"], -32602, "a replay: {replayed}");

    let on_a = receipts_json(&a.config_path(), &["--tool", "test_elicitation"]);
    let on_b = receipts_json(&b.config_path(), &["--tool", "test_elicitation"]);
    assert_eq!(
        (on_a.len(), on_b.len()),
        (1, 0),
        "run once, on A: {on_a:?} {on_b:?}"
    );
}
