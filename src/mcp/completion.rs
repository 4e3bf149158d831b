//! `completion/complete` under contract: relayed only for a declared prompt argument or URI
//! template variable the caller may use, and only values within the argument's `enum`/`pattern`
//! come back. Anything else is answered as an unknown prompt or resource would be.

use rmcp::model::{CompleteRequestParams, CompleteResult, ErrorData, Reference};

use crate::contract::resources::{StringRule, UriMatch};
use crate::mcp::prompts::unknown_prompt;
use crate::mcp::resources::{resource_not_found, upstream_failure};
use crate::policy::Caller;
use crate::runtime::Version;

impl Version {
    pub async fn complete(
        &self,
        caller: &Caller,
        mut request: CompleteRequestParams,
    ) -> Result<CompleteResult, ErrorData> {
        let argument = request.argument.name.clone();
        let unknown_argument = || {
            ErrorData::invalid_params(
                format!("argument `{argument}` is not declared"),
                Some(serde_json::json!({"argument": argument})),
            )
        };
        let (upstream, rule): (&str, &StringRule) = match &mut request.r#ref {
            Reference::Prompt(reference) => {
                let prompt = self
                    .contracts
                    .prompts
                    .get(&reference.name)
                    .filter(|p| caller.may_get(&p.name))
                    .ok_or_else(|| unknown_prompt(&reference.name))?;
                let rule = prompt.argument(&argument).ok_or_else(unknown_argument)?;
                reference.name = prompt.upstream_prompt.clone();
                reference.title = None;
                // Earlier arguments go upstream only when declared and within their rules.
                if let Some(arguments) = request.context.as_mut().and_then(|c| c.arguments.as_mut())
                {
                    arguments.retain(|k, v| prompt.argument(k).is_some_and(|r| r.allows(v)));
                }
                (&prompt.upstream, rule)
            }
            Reference::Resource(reference) => {
                let template = self
                    .contracts
                    .resources
                    .iter()
                    .find(|r| {
                        matches!(&r.matcher, UriMatch::Template { template, .. } if *template == reference.uri)
                    })
                    .filter(|r| caller.may_read(r.declared()))
                    .ok_or_else(|| resource_not_found(&reference.uri))?;
                let rule = template.variable(&argument).ok_or_else(unknown_argument)?;
                if let Some(arguments) = request.context.as_mut().and_then(|c| c.arguments.as_mut())
                {
                    arguments.retain(|k, v| template.variable(k).is_some_and(|r| r.allows(v)));
                }
                (&template.upstream, rule)
            }
            // A kind of reference this version does not know: nothing is declared for it.
            _ => {
                return Err(ErrorData::invalid_params(
                    "unknown completion reference",
                    None,
                ));
            }
        };
        request.meta = None;
        let mut result = self
            .ask_upstream(upstream, async |peer| peer.complete(request).await)
            .await
            .map_err(|e| upstream_failure(upstream, e).0)?;
        let before = result.completion.values.len();
        result.completion.values.retain(|v| rule.allows(v));
        if result.completion.values.len() != before {
            // What was dropped must not be counted either.
            result.completion.total = Some(result.completion.values.len() as u32);
            result.completion.has_more = Some(false);
        }
        Ok(result)
    }
}
