//! Prompts under contract: `prompts/list` and `prompts/get`.
//!
//! A caller sees and gets only the prompts a contract declares and its `prompts` globs allow; any
//! other name gets the answer an unknown prompt gets (`-32602`). Arguments are checked against the
//! contract before the upstream is asked (refusals name the argument, never its value); the
//! messages are bounded like tool results, and a message may embed or link a declared resource
//! only if the caller may read it (see `check_messages`). Every get leaves a receipt, the
//! prompt's name in place of the tool.

use std::time::{Instant, SystemTime};

use rmcp::model::{
    CacheScope, ErrorData, GetPromptRequestParams, GetPromptResult, JsonObject, ListPromptsResult,
};
use serde_json::{Value, json};

use crate::contract::resources::PromptContract;
use crate::mcp::resources::{typed, upstream_failure};
use crate::policy::Caller;
use crate::receipts::Outcome;
use crate::runtime::Version;
use crate::upstream::CallError;

/// The answer to a get of a prompt the caller may not see, or that does not exist.
pub fn unknown_prompt(name: &str) -> ErrorData {
    ErrorData::invalid_params("Unknown prompt", Some(json!({"name": name})))
}

/// Whether `arguments` are within the prompt's contract: only declared ones, strings within their
/// rules, the required ones present. The error names the argument, never its value.
pub fn check_arguments(
    prompt: &PromptContract,
    arguments: Option<&JsonObject>,
) -> Result<(), ErrorData> {
    let refuse = |name: &str, why: &str| {
        ErrorData::invalid_params(
            format!("argument `{name}` of prompt `{}` {why}", prompt.name),
            Some(json!({"argument": name})),
        )
    };
    let empty = JsonObject::new();
    let arguments = arguments.unwrap_or(&empty);
    for (name, value) in arguments {
        let Some(rule) = prompt.argument(name) else {
            return Err(refuse(name, "is not declared"));
        };
        match value.as_str() {
            Some(s) if rule.allows(s) => {}
            Some(_) => return Err(refuse(name, "is outside its enum or pattern")),
            None => return Err(refuse(name, "must be a string")),
        }
    }
    if let Some(missing) = prompt
        .arguments
        .iter()
        .find(|a| a.required && !arguments.contains_key(&a.name))
    {
        return Err(refuse(&missing.name, "is required"));
    }
    Ok(())
}

impl Version {
    /// The declared prompts `caller` may get, with the contract's texts.
    pub fn list_prompts(&self, caller: &Caller) -> Result<ListPromptsResult, ErrorData> {
        let prompts: Vec<Value> = self
            .contracts
            .prompts
            .values()
            .filter(|p| caller.may_get(&p.name))
            .map(|p| {
                let arguments: Vec<Value> = p
                    .arguments
                    .iter()
                    .map(|a| {
                        let mut arg = json!({"name": a.name, "required": a.required});
                        if let Some(d) = &a.description {
                            arg["description"] = json!(d);
                        }
                        arg
                    })
                    .collect();
                let mut item = json!({"name": p.name, "arguments": arguments});
                if let Some(d) = &p.description {
                    item["description"] = json!(d);
                }
                item
            })
            .collect();
        let mut result: ListPromptsResult = typed(json!({"prompts": prompts}))?;
        result.cache_scope = Some(CacheScope::Private);
        result.ttl_ms = Some(self.list_ttl_ms());
        Ok(result)
    }

    /// `prompts/get` for `caller`: declared and allowed, arguments checked, relayed under the
    /// upstream's name, the messages checked, and its receipt left.
    pub async fn get_prompt(
        &self,
        caller: &Caller,
        request: GetPromptRequestParams,
    ) -> Result<GetPromptResult, ErrorData> {
        let started = (SystemTime::now(), Instant::now());
        let _under_way = self.kept.receipts.call_started();
        let name = request.name.clone();
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let (answer, outcome) = self.get_checked(caller, request).await;
        // An unknown name is the client's text: the receipt keeps it, its arguments only digested.
        self.record_access(caller, &name, &arguments, outcome, started)
            .await;
        answer
    }

    async fn get_checked(
        &self,
        caller: &Caller,
        mut request: GetPromptRequestParams,
    ) -> (Result<GetPromptResult, ErrorData>, Outcome) {
        let Some(prompt) = self
            .contracts
            .prompts
            .get(&request.name)
            .filter(|p| caller.may_get(&p.name))
            .cloned()
        else {
            return (Err(unknown_prompt(&request.name)), Outcome::Denied);
        };
        if let Err(e) = check_arguments(&prompt, request.arguments.as_ref()) {
            return (Err(e), Outcome::RejectedInput);
        }
        request.name = prompt.upstream_prompt.clone();
        request.meta = None;
        let asked = self
            .ask_upstream(&prompt.upstream, async |peer| {
                peer.get_prompt(request).await
            })
            .await;
        let mut result = match asked {
            Ok(result) => result,
            Err(CallError::Protocol(e)) if e.code.0 == -32602 => {
                return (Err(unknown_prompt(&prompt.name)), Outcome::UpstreamError);
            }
            Err(e) => {
                let (error, outcome) = upstream_failure(&prompt.upstream, e);
                return (Err(error), outcome);
            }
        };
        if let Err(why) = self.check_messages(caller, &result) {
            tracing::warn!(prompt = %prompt.name, upstream = %prompt.upstream, %why, "prompt rejected");
            let error = ErrorData::internal_error(
                format!(
                    "the messages of prompt `{}` are outside its contract: {why}",
                    prompt.name
                ),
                None,
            );
            return (Err(error), Outcome::RejectedOutput);
        }
        // The contract's text, never the upstream's.
        result.description = prompt.description.clone();
        result.meta = None;
        (Ok(result), Outcome::Ok)
    }

    /// The messages fit in `max_result_bytes` (the prompt's own bound, as a tool result's), a
    /// resource they link is one `caller` may read, and a resource they embed under a URI a
    /// contract declares is one `caller` may read, within that resource's `mime_types`.
    ///
    /// A resource embedded under a URI no contract declares is the prompt's own content, checked
    /// by the prompt's bounds like its text (a tool result's embedded resources are treated
    /// alike): the upstream could put the same bytes in a text block, so refusing it by URI
    /// would protect nothing, and which URIs a prompt embeds often depends on its arguments,
    /// which the contract bounds (`enum`, `pattern`). A declared resource is the contract's to
    /// guard wherever it appears: a caller who may not read it does not get it through a prompt.
    /// A link invites a read, so it must point at something the caller may read.
    fn check_messages(&self, caller: &Caller, result: &GetPromptResult) -> Result<(), String> {
        let messages = serde_json::to_vec(&result.messages).map_err(|e| e.to_string())?;
        let max = self.config.max_result_bytes.0;
        if messages.len() as u64 > max {
            return Err(format!("the messages exceed {max} bytes"));
        }
        for message in &result.messages {
            let message = serde_json::to_value(message).map_err(|e| e.to_string())?;
            let content = &message["content"];
            match content.get("type").and_then(Value::as_str) {
                Some("resource") => {
                    let resource = &content["resource"];
                    let Some(uri) = resource["uri"].as_str() else {
                        return Err("a message embeds a resource without a URI".into());
                    };
                    let Some(declared) = self.contracts.resource_for(uri) else {
                        continue;
                    };
                    if self.readable(caller, uri).is_none() {
                        return Err(
                            "a message embeds a declared resource the caller may not read".into(),
                        );
                    }
                    let mime = resource["mimeType"].as_str();
                    if !declared.mime_types.is_empty()
                        && mime.is_none_or(|m| !declared.mime_types.iter().any(|d| d == m))
                    {
                        return Err(
                            "a message embeds a declared resource outside its mime_types".into(),
                        );
                    }
                }
                Some("resource_link")
                    if content["uri"]
                        .as_str()
                        .is_none_or(|u| self.readable(caller, u).is_none()) =>
                {
                    return Err(
                        "a message links a resource that is not declared for the caller".into(),
                    );
                }
                _ => {}
            }
        }
        Ok(())
    }
}
