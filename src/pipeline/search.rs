//! A searching caller's `search_tools` (docs/discovery.md): the catalog's index ranks the tools
//! this caller may call, and each found tool gets its availability from the same facts the
//! pipeline's steps would meet (the upstream, the scopes, an approval, a rate limit's recent
//! refusal). Nothing is spent: a search is not a call of any tool.

use super::Executed;
use super::failure::Failure;
use crate::approvals::step::Reach;
use crate::contract::Approval;
use crate::contract::errors::ErrorType;
use crate::discovery::{self, Availability, SearchArgs};
use crate::policy::Caller;
use crate::receipts::Outcome;
use crate::runtime::Version;
use crate::runtime::catalog::ExposedTool;
use crate::upstream::Status;
use rmcp::model::JsonObject;

impl Version {
    /// Answers `search_tools` for `caller`: never a tool it may not call.
    pub(super) fn search_tools(
        &self,
        caller: &Caller,
        arguments: Option<&JsonObject>,
        reach: &Reach,
    ) -> Executed {
        let args = match SearchArgs::parse(arguments) {
            Ok(args) => args,
            Err(message) => {
                return (
                    Ok(Failure::new(ErrorType::InvalidArguments, message).into_result()),
                    Outcome::RejectedInput,
                )
                    .into();
            }
        };
        let catalog = self.catalog();
        // The same rule as `tools/list` and step 1 of `execute`: what the caller may call, and
        // an app-only tool only for clients of the UI extension.
        let allowed = |t: &ExposedTool| {
            caller.may_use(&t.contract.name)
                && (reach.ui_client || !t.contract.ui.as_ref().is_some_and(|u| u.app_only()))
        };
        let found = catalog.search(&args.query, args.limit, allowed);
        let answer = discovery::answer(
            found
                .iter()
                .map(|t| (&t.published, self.availability(caller, t, &catalog))),
        );
        (Ok(answer), Outcome::Ok).into()
    }

    /// Whether `caller` can call `tool` now, and if not, the first reason why.
    fn availability(
        &self,
        caller: &Caller,
        tool: &ExposedTool,
        catalog: &crate::runtime::catalog::Catalog,
    ) -> Availability {
        let contract = &tool.contract;
        let upstream_down = tool.upstream_schemas.is_none()
            || matches!(
                catalog.upstream_status.get(&contract.upstream),
                Some(Status::Down { .. }) | None
            );
        if upstream_down {
            return Availability::Blocked(format!(
                "upstream `{}` is unavailable",
                contract.upstream
            ));
        }
        let missing = caller.missing_scopes(&contract.scopes);
        if !missing.is_empty() {
            return Availability::Blocked(format!(
                "requires the scope(s) {}, which you do not hold",
                missing.join(" ")
            ));
        }
        if let Some(wait) = self.kept.limits.refused_for(&caller.name, &contract.name) {
            return Availability::Blocked(format!(
                "rate limited right now: retry in {} ms",
                wait.as_millis().max(1)
            ));
        }
        match contract.approval {
            Approval::None => Availability::Executable,
            Approval::User => Availability::Blocked(
                "approval required: each call waits for your user to accept it".into(),
            ),
            Approval::Approver => Availability::Blocked(
                "approval required: each call waits for an approver's decision".into(),
            ),
        }
    }
}
