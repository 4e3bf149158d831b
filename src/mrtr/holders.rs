//! Which replica holds a parked call, and passing a client's answer on to it.
//!
//! A parked call (`parked`) is a running upstream call in the memory of the replica that parked
//! it, but a stateless client's next request may reach any replica behind a load balancer. With
//! `state: redis://…` each replica records in Redis, for each call it parks, the `requestState`
//! and its own MCP endpoint (`replica_url`), for as long as the call may wait. A replica that
//! gets an answer for a state it does not hold looks the state up and passes the request on,
//! as the client sent it (its credentials included), to the holder, which checks it like any
//! answer (caller, tool, arguments, once) and answers; the reply goes back to the client as is.
//! A request passed on carries [`PASSED_ON`] and is never passed on again. Redis is trusted
//! here as for the rate limits and approvals: whoever can write to it can point a replica's
//! passed-on requests (and their credentials) elsewhere.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData, RequestId};
use serde_json::Value;

use crate::config::{Config, StateBackend};
use crate::state::RedisState;

/// The header marking a request passed on from another replica.
pub const PASSED_ON: &str = "narrowgate-passed-on";

/// How long a passed-on request may take: the holder answers when the call does (or asks again).
const PASS_ON_TIMEOUT: Duration = Duration::from_secs(600);

/// Records `KEYS[1]` → ARGV[1] for ARGV[2] ms.
const RECORD: &str = "redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1";
/// The holder of `KEYS[1]`, if any.
const LOOK_UP: &str = "return redis.call('GET', KEYS[1])";
/// Forgets `KEYS[1]`.
const FORGET: &str = "return redis.call('DEL', KEYS[1])";

/// The fleet's record of parked calls, and this replica's place in it.
pub struct Holders {
    state: RedisState,
    /// This replica's MCP endpoint.
    own: String,
    client: reqwest::Client,
    /// The scripts, hashed once.
    record: redis::Script,
    look_up: redis::Script,
    forget: redis::Script,
}

impl Holders {
    /// With `state: redis://…` and a `replica_url` (or a concrete `listen`); else `None`, and
    /// answers that reach the wrong replica are refused.
    pub fn from_config(config: &Config) -> Option<Holders> {
        let Ok(StateBackend::Redis(url)) = config.state_backend() else {
            return None;
        };
        let Some(own) = config.own_replica_url() else {
            tracing::warn!(
                "state is shared through Redis but `replica_url` is not set and `listen` is not an \
                 address other replicas can reach: a stateless client's answer to a question this \
                 replica asked will be refused on any other replica"
            );
            return None;
        };
        let client = reqwest::Client::builder()
            .timeout(PASS_ON_TIMEOUT)
            .build()
            .ok()?;
        Some(Holders {
            state: RedisState::new(
                &url,
                "stateless clients' answers cannot be passed to the replica that asked",
            ),
            own,
            client,
            record: redis::Script::new(RECORD),
            look_up: redis::Script::new(LOOK_UP),
            forget: redis::Script::new(FORGET),
        })
    }

    /// Records that this replica holds the call parked under `state` for `lifetime`.
    pub async fn record(&self, state: &str, lifetime: Duration) {
        let mut invocation = self.record.key(key_of(state));
        let lifetime_ms = u64::try_from(lifetime.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        invocation.arg(&self.own).arg(lifetime_ms);
        if let Err(error) = self.state.invoke::<i64>(&invocation).await {
            self.failed(&error).await;
        }
    }

    /// Forgets `state` (its call was answered here).
    pub async fn forget(&self, state: &str) {
        if let Err(error) = self
            .state
            .invoke::<i64>(&self.forget.key(key_of(state)))
            .await
        {
            self.failed(&error).await;
        }
    }

    /// The endpoint of the other replica holding `state`, if one does.
    pub async fn holder(&self, state: &str) -> Option<String> {
        // A state is a UUID: anything else was never a parked call's (nor a key to build).
        uuid::Uuid::parse_str(state).ok()?;
        match self
            .state
            .invoke::<Option<String>>(&self.look_up.key(key_of(state)))
            .await
        {
            Ok(holder) => holder.filter(|h| *h != self.own),
            Err(error) => {
                self.failed(&error).await;
                None
            }
        }
    }

    /// Sends the client's `tools/call` (`id`, `params` with its `_meta`) to `holder` with the
    /// client's own headers, and returns the holder's answer.
    pub async fn pass_on(
        &self,
        holder: &str,
        parts: &http::request::Parts,
        id: &RequestId,
        params: &CallToolRequestParams,
    ) -> Result<CallToolResponse, ErrorData> {
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params,
        });
        let mut request = self.client.post(holder).body(body.to_string());
        for name in [
            "authorization",
            "mcp-protocol-version",
            "mcp-method",
            "mcp-name",
            "traceparent",
            "tracestate",
        ] {
            for value in parts.headers.get_all(name) {
                request = request.header(name, value.clone());
            }
        }
        let unreachable = |error: String| {
            ErrorData::internal_error(
                format!("the replica holding this call ({holder}) did not answer: {error}"),
                None,
            )
        };
        let response = request
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header(PASSED_ON, "1")
            .send()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let text = response
            .text()
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        answer_of(&text).unwrap_or_else(|| {
            Err(unreachable(format!(
                "an answer that is not one: {}",
                text.chars().take(200).collect::<String>()
            )))
        })
    }

    async fn failed(&self, error: &str) {
        self.state
            .failed(&format!(
                "parked calls: Redis at {} failed: {error}",
                self.state.shown_url()
            ))
            .await;
    }
}

/// The JSON-RPC answer in a reply body: one JSON object, or the last `data:` of an SSE stream.
fn answer_of(text: &str) -> Option<Result<CallToolResponse, ErrorData>> {
    let message: Value = serde_json::from_str(text).ok().or_else(|| {
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .rfind(|m| m.get("result").is_some() || m.get("error").is_some())
    })?;
    if let Some(error) = message.get("error") {
        return serde_json::from_value(error.clone()).ok().map(Err);
    }
    let result = message.get("result")?.clone();
    let response = if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
        CallToolResponse::InputRequired(serde_json::from_value(result).ok()?)
    } else {
        CallToolResponse::Complete(serde_json::from_value(result).ok()?)
    };
    Some(Ok(response))
}

fn key_of(state: &str) -> String {
    format!("narrowgate:parked:{state}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: the holder's reply is read as JSON or as an SSE stream, a result by its
    /// `resultType`, an error as the error; anything else is no answer.
    #[test]
    fn a_holders_reply_is_read_as_the_client_would() {
        let complete = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}"#;
        assert!(matches!(
            answer_of(complete),
            Some(Ok(CallToolResponse::Complete(_)))
        ));
        let asked = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\",\"requestState\":\"s\"}}\n\n";
        assert!(matches!(
            answer_of(asked),
            Some(Ok(CallToolResponse::InputRequired(_)))
        ));
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#;
        assert!(matches!(answer_of(error), Some(Err(e)) if e.code.0 == -32602));
        assert!(answer_of("<html>bad gateway</html>").is_none());
    }
}
