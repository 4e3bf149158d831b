//! The approval step of a `tools/call` (`approval: user | approver`): after the arguments
//! validate, the preconditions hold and the scopes are there, before the rate limits and the
//! upstream. A call that is not approved is never forwarded.
//!
//! `approval: user` asks the calling client's user with an `elicitation/create` request sent on
//! the call's own stream (through rmcp's peer of the request), showing the tool, its description
//! and the arguments with the contract's `redact` paths masked. On a 2026-07-28 stateless request,
//! which has no such stream, the same question travels as an `InputRequiredResult` (MRTR): the
//! call is answered with the question and a `requestState` the gateway keeps
//! ([`crate::approvals::questions`]), and the client sends the call again with the user's answer.
//! Only an explicit accept forwards the call; a decline, a cancel, a client that did not declare
//! elicitation, or an answer to a question this gateway did not ask for this very call is
//! refused: fail closed.
//!
//! `approval: approver` holds the call in [`crate::approvals::Approvals`] until an approver
//! decides.

use std::sync::Arc;
use std::time::Instant;

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::service::{ElicitationMode, Peer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approvals::{Approvals, Binding, Request, Verdict};
use crate::contract::digest::sha256_of;
use crate::contract::{Approval, ToolContract};
use crate::policy::Caller;
use crate::receipts::{ApprovalRecord, redact};
use crate::telemetry;
use crate::upstream::call_relay::CallRelay;

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
    /// A 2026-07-28 stateless request: the user is asked through MRTR.
    pub mrtr: Option<Mrtr>,
    /// The client declared MCP Apps' UI extension: it may call app-only tools.
    pub ui_client: bool,
    /// Where the upstream's progress, log messages and requests of the client go while the call
    /// runs (`upstream::call_relay`); absent on the direct path, which has no stream for them.
    pub relay: Option<Arc<CallRelay>>,
}

/// The MRTR side of a stateless request (`approval: user`): what it brought back, and what the
/// step asks in return.
pub struct Mrtr {
    /// Whether the client declared elicitation (in `_meta`'s client capabilities).
    pub elicitation: bool,
    /// `inputResponses` of a call sent again with the user's answer.
    pub input_responses: Option<InputResponses>,
    /// `requestState` of such a call.
    pub request_state: Option<String>,
}

impl Mrtr {
    /// A stateless request's MRTR side: whether its client declared elicitation, and what it
    /// brought back (`inputResponses`, `requestState`) if it is a call sent again.
    pub fn new(
        elicitation: bool,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
    ) -> Mrtr {
        Mrtr {
            elicitation,
            input_responses,
            request_state,
        }
    }
}

/// The key of the approval question in `inputRequests` / `inputResponses`.
pub const QUESTION_KEY: &str = "narrowgate/approval";

/// A call the step refused: what the receipt records, the tool error's text, and the receipt's
/// reason.
pub struct Refused {
    pub record: ApprovalRecord,
    pub message: String,
    pub reason: String,
    /// The question the call is answered with instead (MRTR): the user has not answered yet.
    pub asked: Option<Box<InputRequiredResult>>,
}

/// A call the step lets through: what the receipt records, and the approver's reason if any.
pub struct Granted {
    pub record: ApprovalRecord,
    pub reason: Option<String>,
}

/// The result of the step: forward, or refuse.
pub type Approved = Result<Granted, Box<Refused>>;

impl Approvals {
    /// Asks whoever the contract names to approve this call.
    pub(crate) async fn approve(
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
            Approval::User => match &reach.mrtr {
                Some(mrtr) => {
                    self.ask_user_mrtr(caller, contract, arguments, &shown, mrtr)
                        .await
                }
                None => ask_user(reach.peer.as_ref(), contract, &shown).await,
            },
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
                match self.wait(request).await {
                    Verdict::Approved { record, reason } => Ok(Granted { record, reason }),
                    Verdict::Refused {
                        record,
                        message,
                        reason,
                    } => Err(Box::new(Refused {
                        record,
                        message,
                        reason,
                        asked: None,
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
    let user = UserDecision::started();
    let refuse = |decision, approver, message| user.refuse(decision, approver, message);
    let Some(peer) = peer else {
        return refuse(
            "unsupported",
            None,
            format!(
                "`{}` needs the user's approval, which this request cannot ask for: the call \
                 was not performed",
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
    let asked = peer.create_elicitation(question(contract, shown)).await;
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
    user.answered(contract, answer.action, answer.content.as_ref())
}

/// What the user's approval records (its wait included) and how it ends, whichever way it was
/// asked.
struct UserDecision {
    started: Instant,
}

impl UserDecision {
    fn started() -> UserDecision {
        UserDecision {
            started: Instant::now(),
        }
    }

    fn record(&self, decision: &'static str, approver: Option<&str>) -> ApprovalRecord {
        ApprovalRecord {
            id: None,
            decision,
            approver: approver.map(str::to_string),
            wait: self.started.elapsed(),
        }
    }

    /// The call is not forwarded: `decision` for the receipt and the span, `message` for the
    /// client.
    fn refuse(&self, decision: &'static str, approver: Option<&str>, message: String) -> Approved {
        telemetry::event(
            "narrowgate.approval.user",
            &[("approval.decision", decision.to_string())],
        );
        Err(Box::new(Refused {
            record: self.record(decision, approver),
            reason: format!("the user's approval: {decision}"),
            message,
            asked: None,
        }))
    }

    /// The user's answer: accept (without `approve: false`) forwards the call; anything else
    /// refuses it.
    fn answered(
        &self,
        contract: &ToolContract,
        action: ElicitationAction,
        content: Option<&Value>,
    ) -> Approved {
        if approves(action.clone(), content) {
            telemetry::event(
                "narrowgate.approval.user",
                &[("approval.decision", "accepted".to_string())],
            );
            return Ok(Granted {
                record: self.record("accepted", Some("user")),
                reason: None,
            });
        }
        let decision = match action {
            ElicitationAction::Cancel => "cancelled",
            _ => "declined",
        };
        self.refuse(
            decision,
            Some("user"),
            format!(
                "the user did not approve this call of `{}` ({decision}): it was not performed",
                contract.name
            ),
        )
    }
}

/// The question put to the user: the tool, its description and the arguments as shown (masked).
fn question(contract: &ToolContract, shown: &Value) -> ElicitRequestParams {
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
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    }
}

/// The accept action is the answer; an `approve: false` inside it is a no.
fn approves(action: ElicitationAction, content: Option<&Value>) -> bool {
    action == ElicitationAction::Accept
        && content
            .and_then(|c| c.get("approve"))
            .is_none_or(|v| *v == Value::Bool(true))
}

impl Approvals {
    /// `approval: user` on a 2026-07-28 stateless request: the first time, the question as an
    /// `InputRequiredResult` (kept in `mrtr`, the call refused meanwhile); sent again with an
    /// answer and the `requestState`, the answer, if the state is one this gateway holds for this
    /// very call.
    async fn ask_user_mrtr(
        &self,
        caller: &Caller,
        contract: &ToolContract,
        arguments: &Value,
        shown: &Value,
        mrtr: &Mrtr,
    ) -> Approved {
        // The wait of an MRTR approval is the answering round's: the gateway holds nothing
        // between the two rounds but the question's record.
        let user = UserDecision::started();
        let refuse = |decision, approver, message| user.refuse(decision, approver, message);
        let binding = Binding {
            caller: caller.name.clone(),
            tool: contract.name.clone(),
            contract_digest: contract.digest.clone(),
            arguments_digest: sha256_of(arguments),
        };
        let questions = &self.questions;
        if let Some(state) = &mrtr.request_state {
            let asked_for = match questions.take(state).await {
                Ok(asked_for) => asked_for,
                Err(e) => {
                    return refuse(
                        "unavailable",
                        None,
                        format!(
                            "`{}` needs the user's approval, which cannot be checked now ({e}): \
                             the call was not performed",
                            contract.name
                        ),
                    );
                }
            };
            if asked_for.as_ref() != Some(&binding) {
                return refuse(
                    "unknown",
                    None,
                    format!(
                        "this answer is to no question the gateway asked for this call of `{}` \
                         (expired, already used, or asked for other arguments): call it again \
                         without requestState to be asked",
                        contract.name
                    ),
                );
            }
            let answer = mrtr
                .input_responses
                .as_ref()
                .and_then(|r| r.get(QUESTION_KEY))
                .cloned()
                .and_then(|a| serde_json::from_value::<rmcp::model::ElicitResult>(a).ok());
            let Some(answer) = answer else {
                return refuse(
                    "unanswered",
                    None,
                    format!(
                        "the user's answer about `{}` is missing from inputResponses: the call \
                         was not performed",
                        contract.name
                    ),
                );
            };
            return user.answered(contract, answer.action, answer.content.as_ref());
        }
        if !mrtr.elicitation {
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
        let id = match questions.ask(&binding, contract.approval_timeout).await {
            Ok(id) => id,
            Err(e) => {
                return refuse(
                    "unavailable",
                    None,
                    format!(
                        "`{}` needs the user's approval, which cannot be asked now ({e}): the \
                         call was not performed",
                        contract.name
                    ),
                );
            }
        };
        let mut requests = InputRequests::new();
        requests.insert(
            QUESTION_KEY.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(question(contract, shown))),
        );
        let asked = InputRequiredResult::new(Some(requests), Some(id));
        telemetry::event(
            "narrowgate.approval.user",
            &[("approval.decision", "asked".to_string())],
        );
        Err(Box::new(Refused {
            record: user.record("asked", None),
            reason: "the user's approval: asked".to_string(),
            message: format!("`{}` waits for the user's approval", contract.name),
            asked: Some(Box::new(asked)),
        }))
    }
}
