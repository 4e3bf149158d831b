//! Resources under contract: `resources/list`, `resources/templates/list` and `resources/read`.
//!
//! A caller sees and reads only what a contract declares and its `resources` globs allow; anything
//! else gets the answer a URI that does not exist gets (`-32602`, "Resource not found"), never the
//! upstream's. A read's contents are checked (URI, MIME type, size) before the client sees them,
//! and every read leaves a receipt, the URI in place of the tool.

use std::time::{Duration, Instant, SystemTime};

use rmcp::model::{
    CacheScope, ErrorData, ListResourceTemplatesResult, ListResourcesResult,
    ReadResourceRequestParams, ReadResourceResult,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::contract::resources::{ResourceContract, UriMatch};
use crate::policy::Caller;
use crate::receipts::{Call, Outcome};
use crate::runtime::Version;
use crate::telemetry;
use crate::upstream::CallError;

/// How long a resources, prompts or completion request may wait for the upstream when it sets
/// no `timeout`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The answer to a read of a URI the caller may not see, or that does not exist (SEP-2164).
pub fn resource_not_found(uri: &str) -> ErrorData {
    ErrorData::invalid_params("Resource not found", Some(json!({"uri": uri})))
}

/// A request the upstream could not answer, in the gateway's words (the upstream's text is never
/// relayed), and the outcome its receipt records.
pub(crate) fn upstream_failure(upstream: &str, error: CallError) -> (ErrorData, Outcome) {
    let outcome = match error {
        CallError::Timeout(_) => Outcome::Timeout,
        _ => Outcome::UpstreamError,
    };
    let message = match error {
        CallError::Protocol(e) => {
            format!(
                "upstream {upstream} refused the request (error {})",
                e.code.0
            )
        }
        other => other.to_string(),
    };
    (ErrorData::internal_error(message, None), outcome)
}

/// rmcp's client error as the gateway's.
pub(crate) fn call_error(upstream: &str, error: ServiceError) -> CallError {
    match error {
        ServiceError::McpError(e) => CallError::Protocol(e),
        ServiceError::Timeout { timeout } => CallError::Timeout(timeout),
        _ => CallError::ConnectionLost(upstream.to_string()),
    }
}

/// Converts a value the gateway built into one of rmcp's result types.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot build the answer: {e}"), None))
}

impl Version {
    /// The per-request timeout of `upstream`.
    pub(crate) fn upstream_timeout(&self, upstream: &str) -> Duration {
        self.kept
            .upstreams
            .get(upstream)
            .and_then(|u| u.default_timeout)
            .unwrap_or(DEFAULT_TIMEOUT)
    }

    /// Sends `request` to `upstream` through rmcp's client, within the upstream's timeout.
    pub(crate) async fn ask_upstream<T, F>(
        &self,
        upstream: &str,
        request: impl FnOnce(rmcp::service::Peer<rmcp::RoleClient>) -> F,
    ) -> Result<T, CallError>
    where
        F: Future<Output = Result<T, ServiceError>>,
    {
        let peer = self
            .kept
            .upstreams
            .get(upstream)
            .ok_or_else(|| CallError::Unavailable(upstream.to_string()))?
            .peer()?;
        let timeout = self.upstream_timeout(upstream);
        match tokio::time::timeout(timeout, request(peer)).await {
            Ok(result) => result.map_err(|e| call_error(upstream, e)),
            Err(_) => Err(CallError::Timeout(timeout)),
        }
    }

    /// Leaves the receipt of a `resources/read` or `prompts/get` (`name`: the URI or the prompt).
    pub(crate) async fn record_access(
        &self,
        caller: &Caller,
        name: &str,
        arguments: &Value,
        outcome: Outcome,
        (started, clock): (SystemTime, Instant),
    ) {
        let call = Call {
            caller: &caller.name,
            tool: name,
            contract: None,
            arguments,
            outcome,
            attempts: u32::from(!matches!(outcome, Outcome::Denied | Outcome::RejectedInput)),
            replayed: false,
            reason: None,
            approval: None,
            started,
            duration: clock.elapsed(),
            trace_id: telemetry::trace_id(),
            error_type: None,
            fallback: None,
            cached: false,
        };
        telemetry::note_call(&call);
        let receipt = self.kept.receipts.record(&call).await;
        tracing::info!(caller = %caller.name, target = %name, %outcome,
            receipt = %receipt.as_deref().unwrap_or("-"), "resource or prompt access");
    }

    /// The resources the upstreams list that a contract declares (exact URIs and globs) and
    /// `caller` may read, with the contract's texts.
    pub async fn list_resources(&self, caller: &Caller) -> Result<ListResourcesResult, ErrorData> {
        let mut upstreams: Vec<&str> = self
            .contracts
            .resources
            .iter()
            .filter(|r| !matches!(r.matcher, UriMatch::Template { .. }))
            .map(|r| r.upstream.as_str())
            .collect();
        upstreams.dedup();
        let mut published = Vec::new();
        for upstream in upstreams {
            // A down upstream lists nothing; the others still do.
            let Ok(listed) = self
                .ask_upstream(upstream, async |peer| peer.list_all_resources().await)
                .await
            else {
                continue;
            };
            for resource in listed {
                let uri = resource.uri.as_str();
                let Some(entry) = self
                    .contracts
                    .resource_for(uri)
                    .filter(|e| e.upstream == upstream && caller.may_read(uri))
                else {
                    continue;
                };
                if published.iter().any(|p: &Value| p["uri"] == uri) {
                    continue;
                }
                let mut item = json!({"uri": uri, "name": uri});
                if let Some(d) = &entry.description {
                    item["description"] = json!(d);
                }
                if let [only] = entry.mime_types.as_slice() {
                    item["mimeType"] = json!(only);
                }
                published.push(item);
            }
        }
        let mut result: ListResourcesResult = typed(json!({"resources": published}))?;
        result.cache_scope = Some(CacheScope::Private);
        result.ttl_ms = Some(self.list_ttl_ms());
        Ok(result)
    }

    /// The declared URI templates `caller` may read, as declared.
    pub fn list_resource_templates(
        &self,
        caller: &Caller,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates: Vec<Value> = self
            .contracts
            .resources
            .iter()
            .filter(|r| matches!(r.matcher, UriMatch::Template { .. }))
            .filter(|r| caller.may_read(r.declared()))
            .map(|r| {
                let mut item = json!({"uriTemplate": r.declared(), "name": r.declared()});
                if let Some(d) = &r.description {
                    item["description"] = json!(d);
                }
                if let [only] = r.mime_types.as_slice() {
                    item["mimeType"] = json!(only);
                }
                item
            })
            .collect();
        let mut result: ListResourceTemplatesResult =
            typed(json!({"resourceTemplates": templates}))?;
        result.cache_scope = Some(CacheScope::Private);
        result.ttl_ms = Some(self.list_ttl_ms());
        Ok(result)
    }

    /// The declared entry `caller` may read `uri` under, if any.
    pub fn readable(&self, caller: &Caller, uri: &str) -> Option<&ResourceContract> {
        self.contracts
            .resource_for(uri)
            .filter(|_| caller.may_read(uri))
            .map(AsRef::as_ref)
    }

    /// `resources/read` for `caller`: declared and allowed, relayed, its contents checked, and
    /// its receipt left.
    pub async fn read_resource(
        &self,
        caller: &Caller,
        request: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, ErrorData> {
        let started = (SystemTime::now(), Instant::now());
        let _under_way = self.kept.receipts.call_started();
        let uri = request.uri.clone();
        let (answer, outcome) = self.read_checked(caller, request).await;
        self.record_access(caller, &uri, &json!({}), outcome, started)
            .await;
        answer
    }

    async fn read_checked(
        &self,
        caller: &Caller,
        request: ReadResourceRequestParams,
    ) -> (Result<ReadResourceResult, ErrorData>, Outcome) {
        let Some(entry) = self.readable(caller, &request.uri) else {
            return (Err(resource_not_found(&request.uri)), Outcome::Denied);
        };
        let uri = request.uri.clone();
        let asked = self
            .ask_upstream(&entry.upstream, async |peer| {
                peer.read_resource(request).await
            })
            .await;
        let mut result = match asked {
            Ok(result) => result,
            // The upstream's own "not found" for a declared URI: the gateway's, not its text.
            Err(CallError::Protocol(e)) if e.code.0 == -32602 => {
                return (Err(resource_not_found(&uri)), Outcome::UpstreamError);
            }
            Err(e) => {
                let (error, outcome) = upstream_failure(&entry.upstream, e);
                return (Err(error), outcome);
            }
        };
        let max = entry.max_bytes.unwrap_or(self.config.max_result_bytes.0);
        if let Err(why) = check_contents(entry, &uri, &result, max) {
            tracing::warn!(%uri, upstream = %entry.upstream, %why, "resource read rejected");
            let error = ErrorData::internal_error(
                format!("the contents of {uri} are outside its contract: {why}"),
                None,
            );
            return (Err(error), Outcome::RejectedOutput);
        }
        result.meta = None;
        (Ok(result), Outcome::Ok)
    }
}

/// Checks what a read returned: each content's URI is the one read (or within the same
/// declaration), its MIME type one of `mime_types` when declared, and the total within `max`
/// bytes. The reason names the rule, never the content.
pub fn check_contents(
    entry: &ResourceContract,
    uri: &str,
    result: &ReadResourceResult,
    max: u64,
) -> Result<(), String> {
    let mut total: u64 = 0;
    for content in &result.contents {
        let content = serde_json::to_value(content).map_err(|e| e.to_string())?;
        let got = content.get("uri").and_then(Value::as_str).unwrap_or("");
        if got != uri && !entry.matches(got) {
            return Err("a content carries a URI other than the one read".into());
        }
        if !entry.mime_types.is_empty() {
            let mime = content.get("mimeType").and_then(Value::as_str);
            if !mime.is_some_and(|m| entry.mime_types.iter().any(|t| t == m)) {
                return Err(format!(
                    "a content's mimeType is not one of {}",
                    entry.mime_types.join(", ")
                ));
            }
        }
        for key in ["text", "blob"] {
            if let Some(s) = content.get(key).and_then(Value::as_str) {
                total = total.saturating_add(s.len() as u64);
            }
        }
        if total > max {
            return Err(format!("the contents exceed {max} bytes"));
        }
    }
    Ok(())
}

impl Version {
    /// `resources/subscribe` (`subscribe: true`) or `unsubscribe` for `caller`: only a declared
    /// URI the caller may read; anything else is "Resource not found". A subscribe is relayed
    /// upstream (the upstream connection is shared, so the session's own subscriptions are kept
    /// by its handler, `subscriptions::Subscribed`); an unsubscribe is not, since other sessions
    /// may still be subscribed: the session just stops hearing of the URI.
    pub async fn subscription(
        &self,
        caller: &Caller,
        uri: &str,
        subscribe: bool,
    ) -> Result<(), ErrorData> {
        let Some(entry) = self.readable(caller, uri) else {
            return Err(resource_not_found(uri));
        };
        if !subscribe {
            return Ok(());
        }
        let upstream = entry.upstream.clone();
        // `resources/subscribe`, or a `subscriptions/listen` filter on a 2026-07-28 upstream.
        let asked = match self.kept.upstreams.get(&upstream) {
            Some(up) => {
                self.ask_upstream(&upstream, async |peer| {
                    up.subscribe_resource(&peer, uri).await
                })
                .await
            }
            None => Err(CallError::Unavailable(upstream.clone())),
        };
        match asked {
            Ok(()) => Ok(()),
            Err(CallError::Protocol(e)) if e.code.0 == -32602 => Err(resource_not_found(uri)),
            Err(e) => Err(upstream_failure(&upstream, e).0),
        }
    }
}
