//! Step 2e of a `tools/call`: the result cache of a `cache:` tool (docs/semantics.md,
//! "Caching"). An identical call (the same caller unless `cache_scope: shared`, the same
//! arguments as sent upstream) inside the window is answered from the cache, marked
//! `narrowgate/cached`; only successful results are kept.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::Value;

use super::Executed;
use crate::contract::digest;
use crate::contract::errors::CacheScope;
use crate::policy::Caller;
use crate::receipts::Outcome;
use crate::runtime::Version;
use crate::runtime::catalog::ExposedTool;
use crate::state::results::ResultKey;
use crate::upstream::call_relay::CallRelay;

/// The `_meta` key marking an answer from the result cache.
pub const CACHED_META: &str = "narrowgate/cached";

impl Version {
    /// The cached answer of an identical call, else the call (deduplicated as any other), whose
    /// successful result is then kept for `window`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn cached(
        &self,
        window: Duration,
        caller: &Caller,
        tool: &ExposedTool,
        request: CallToolRequestParams,
        arguments: &Value,
        idempotency_key: Option<String>,
        relay: Option<&Arc<CallRelay>>,
    ) -> Executed {
        let contract = &tool.contract;
        let key = ResultKey {
            caller: (contract.cache_scope == CacheScope::Caller).then(|| caller.name.clone()),
            tool: contract.name.clone(),
            contract_digest: contract.digest.clone(),
            arguments_digest: digest::sha256_of(arguments),
        };
        if let Some(mut result) = self.kept.results.get(&key) {
            result
                .meta
                .get_or_insert_default()
                .0
                .insert(CACHED_META.into(), Value::Bool(true));
            return Executed {
                cached: true,
                ..(Ok(result), Outcome::Ok).into()
            };
        }
        let executed = self
            .deduplicated(caller, tool, request, arguments, idempotency_key, relay)
            .await;
        if let (Ok(result), Outcome::Ok, false) =
            (&executed.answer, executed.outcome, executed.replayed)
        {
            self.kept.results.put(key, result, window);
        }
        executed
    }
}
