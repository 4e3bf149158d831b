//! The approval step of a `tools/call` (`approval: user | approver`): after the arguments
//! validate, the preconditions hold and the scopes are there, before the rate limits and the
//! upstream. A call that is not approved is never forwarded.
//!
//! `approval: user` asks the calling client's user with an `elicitation/create` request sent on
//! the call's own stream (through rmcp's peer of the request), showing the tool, its description
//! and the arguments with the contract's `redact` paths masked. Only an explicit accept forwards
//! the call; a decline, a cancel, a client that did not declare elicitation, or a request that
//! cannot carry a server-to-client request (2026-07-28 stateless requests, for now) is refused:
//! fail closed.
//!
//! `approval: approver` holds the call in [`super::approvals::Approvals`] until an approver
//! decides.

use std::time::Instant;

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::approvals::{Binding, Request, Verdict};
use crate::contract::digest::sha256_of;
use crate::contract::{Approval, ToolContract};
use crate::policy::Caller;
use crate::receipts::{ApprovalRecord, redact};
use crate::telemetry;

/// The `_meta` key with which a client names the approval it comes back to collect.
pub const APPROVAL_ID_META: &str = "narrowgate/approvalId";

/// How the call can reach its client while it waits: rmcp's peer of the request (absent on
/// the gateway's direct path, which never takes `approval: user` tools), and a token cancelled
/// when the client goes away.
#[derive(Default)]
pub struct Reach {
    pub peer: Option<Peer<RoleServer>>,
    pub client_gone: Option<CancellationToken>,
    /// `_meta["narrowgate/approvalId"]` of the request: the approval the client comes back for.
    pub approval_id: Option<String>,
}

/// A call the step refused: what the receipt records, the tool error's text, and the receipt's
/// reason.
pub struct Refused {
    pub record: ApprovalRecord,
    pub message: String,
    pub reason: String,
}

/// A call the step lets through: what the receipt records, and the approver's reason if any.
pub struct Granted {
    pub record: ApprovalRecord,
    pub reason: Option<String>,
}

/// The result of the step: forward, or refuse.
pub type Approved = Result<Granted, Box<Refused>>;

impl Gateway {
    /// Asks whoever the contract names to approve this call.
    pub(super) async fn approve(
        &self,
        caller: &Caller,
        contract: &ToolContract,
        arguments: &Value,
        reach: &Reach,
    ) -> Approved {
        let shown = if contract.redact.is_empty() {
            arguments.clone()
        } else {
            redact(arguments, &contract.redact)
        };
        match contract.approval {
            Approval::None => Ok(Granted {
                record: ApprovalRecord {
                    id: None,
                    decision: "none",
                    approver: None,
                    wait: std::time::Duration::ZERO,
                },
                reason: None,
            }),
            Approval::User => ask_user(reach.peer.as_ref(), contract, &shown).await,
            Approval::Approver => {
                let request = Request {
                    binding: Binding {
                        caller: caller.name.clone(),
                        tool: contract.name.clone(),
                        contract_digest: contract.digest.clone(),
                        // The digest of what the client sent, redaction aside: an approval
                        // given for one secret is not one for another.
                        arguments_digest: sha256_of(arguments),
                    },
                    shown_arguments: shown,
                    timeout: contract.approval_timeout,
                    named_id: reach.approval_id.as_deref(),
                    client_gone: reach.client_gone.as_ref(),
                };
                match self.approvals.wait(request).await {
                    Verdict::Approved { record, reason } => Ok(Granted { record, reason }),
                    Verdict::Refused {
                        record,
                        message,
                        reason,
                    } => Err(Box::new(Refused {
                        record,
                        message,
                        reason,
                    })),
                }
            }
        }
    }
}

/// `approval: user`: one `elicitation/create` to the calling client.
async fn ask_user(
    peer: Option<&Peer<RoleServer>>,
    contract: &ToolContract,
    shown: &Value,
) -> Approved {
    let started = Instant::now();
    let record = |decision: &'static str, approver: Option<&str>| ApprovalRecord {
        id: None,
        decision,
        approver: approver.map(str::to_string),
        wait: started.elapsed(),
    };
    let refuse = |decision: &'static str, approver, message: String| {
        telemetry::event(
            "narrowgate.approval.user",
            &[("approval.decision", decision.to_string())],
        );
        Err(Box::new(Refused {
            record: record(decision, approver),
            reason: format!("the user's approval: {decision}"),
            message,
        }))
    };
    let Some(peer) = peer else {
        return refuse(
            "unsupported",
            None,
            format!(
                "`{}` needs the user's approval, which this request cannot ask for \
                 (2026-07-28 stateless requests cannot carry one yet): call it in a session",
                contract.name
            ),
        );
    };
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return refuse(
            "unsupported",
            None,
            format!(
                "`{}` needs the user's approval, and this client did not declare the \
                 elicitation capability: the call was not performed",
                contract.name
            ),
        );
    }
    let arguments = serde_json::to_string_pretty(shown).unwrap_or_else(|_| shown.to_string());
    let message = format!(
        "Allow this call of `{}`?\n\n{}\n\nArguments:\n{arguments}",
        contract.name,
        contract
            .description
            .as_deref()
            .unwrap_or("(no description)"),
    );
    let requested_schema = ElicitationSchema::builder()
        .required_bool("approve")
        .build_unchecked();
    let asked = peer
        .create_elicitation(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        })
        .await;
    let answer = match asked {
        Ok(answer) => answer,
        Err(e) => {
            return refuse(
                "unsupported",
                None,
                format!(
                    "`{}` needs the user's approval, and asking the client failed ({e}): \
                     the call was not performed",
                    contract.name
                ),
            );
        }
    };
    // The accept action is the answer; an `approve: false` inside it is a no.
    let approved = answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|c| c.get("approve"))
            .is_none_or(|v| *v == Value::Bool(true));
    if approved {
        telemetry::event(
            "narrowgate.approval.user",
            &[("approval.decision", "accepted".to_string())],
        );
        return Ok(Granted {
            record: record("accepted", Some("user")),
            reason: None,
        });
    }
    let decision = match answer.action {
        ElicitationAction::Cancel => "cancelled",
        _ => "declined",
    };
    refuse(
        decision,
        Some("user"),
        format!(
            "the user did not approve this call of `{}` ({decision}): it was not performed",
            contract.name
        ),
    )
}
