//! Upstream requests of a 2026-07-28 stateless client, asked through MRTR.
//!
//! A stateless request has no stream on which the gateway could send its client the
//! `elicitation/create`, `sampling/createMessage` or `roots/list` an upstream makes during the
//! call. So when the upstream asks, the call is *parked*: it keeps running in a task of its own
//! (the upstream still waits for its answer), and the client's request is answered with an
//! `InputRequiredResult` carrying the upstream's requests and a `requestState`. The client sends
//! the call again with its answers (`inputResponses`) and that state; the gateway hands the
//! answers to the waiting upstream requests and answers this request as the call goes on: with
//! its result, or with the upstream's next question.
//!
//! The state is the id of a record kept here (an unguessable UUID, never data), bound to the
//! caller, the tool and the arguments' digest: an answer is accepted only for the very call it
//! was asked for, by the caller who made it, once (the record is taken as it is read). A parked
//! call lives in the memory of the replica that parked it (`holders` passes an answer that
//! reaches another replica on to it); a state no replica holds (expired, answered already, made
//! up) is refused, never run as a new call. The upstream's requests are checked on the way out like on a session (the
//! contract's `relay:`, the client's declared capabilities) and the client's answers on the way
//! back (each parsed as the result its request expects; an accepted elicitation against its
//! `requestedSchema`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::trace::FutureExt as _;
use rmcp::model::{
    CallToolResponse, ErrorData, InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::mrtr::holders::Holders;

/// Calls parked at most: beyond it a new question is refused (the upstream gets an error)
/// rather than the store growing.
const MAX_PARKED: usize = 10_000;

/// How long a parked call's record outlives the call's own deadline: time for the client to
/// come back for a result the call reached while it was away.
const KEPT_AFTER: Duration = Duration::from_secs(60);

/// Questions the upstream asks at once, per call (more wait for the next round).
const MAX_PER_ROUND: usize = 4;

/// The answer to a stateless `tools/call`: its result, or the question it waits on.
pub type Response = Result<CallToolResponse, ErrorData>;

/// A call's own future, run to its end wherever it is parked.
pub type Call = Pin<Box<dyn Future<Output = Response> + Send>>;

/// What an answer is accepted for: the caller, the tool as the client named it, and the
/// digest of the arguments.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Binding {
    pub caller: String,
    pub tool: String,
    pub arguments_digest: String,
}

/// One request the upstream made of the client, waiting for its answer.
pub struct Question {
    pub method: String,
    pub params: Value,
    pub answer: oneshot::Sender<Result<Value, ErrorData>>,
}

/// Where a stateless call's relay sends the upstream's requests.
pub type Questions = mpsc::Sender<Question>;

/// A fresh channel for one stateless call's questions.
pub fn questions() -> (Questions, mpsc::Receiver<Question>) {
    mpsc::channel(MAX_PER_ROUND * 4)
}

/// The calls of this replica waiting for their stateless clients' answers.
#[derive(Default)]
pub struct ParkedCalls {
    calls: Mutex<HashMap<String, Parked>>,
    /// The fleet's record of who holds which call (`holders`), with `state: redis://…`; set
    /// by each version of the configuration.
    holders: std::sync::RwLock<Option<Arc<Holders>>>,
}

/// A call waiting for its client.
struct Parked {
    binding: Binding,
    /// Until when the record is kept.
    until: Instant,
    /// The questions sent to the client, by their `inputRequests` key.
    asked: Vec<(String, Question)>,
    /// Further questions of the call.
    questions: mpsc::Receiver<Question>,
    /// The call itself, running.
    call: JoinHandle<Response>,
    /// Cancels the call (a client that closes the stream of a round cancels it).
    cancel: CancellationToken,
}

/// A round of a stateless call: what it waits on.
struct Round {
    questions: mpsc::Receiver<Question>,
    call: Running,
    cancel: CancellationToken,
}

enum Running {
    /// Still in this request's task (nothing was asked yet).
    Here(Call),
    /// In a task of its own (parked before).
    Spawned(JoinHandle<Response>),
}

impl ParkedCalls {
    /// Runs a stateless call whose upstream may ask its client something (its relay sends the
    /// questions to `questions`). `cancel` cancels the call (its relay's token); `client_gone`
    /// is this request's own cancellation. Answers with the call's result, or, if the upstream
    /// asks first, with an `InputRequiredResult`, the call parked.
    pub async fn run(
        &self,
        binding: Binding,
        call: Call,
        questions: mpsc::Receiver<Question>,
        cancel: CancellationToken,
        client_gone: Option<CancellationToken>,
        lifetime: Duration,
    ) -> Response {
        let round = Round {
            questions,
            call: Running::Here(call),
            cancel,
        };
        self.wait(binding, round, client_gone, lifetime).await
    }

    /// Goes on with the call parked under `state` with the client's `responses`, if `binding`
    /// is the one it was parked for.
    pub async fn resume(
        &self,
        state: &str,
        binding: &Binding,
        responses: Option<InputResponses>,
        client_gone: Option<CancellationToken>,
    ) -> Response {
        let parked = {
            let mut calls = self.lock();
            match calls.get(state) {
                Some(parked) if parked.binding == *binding && parked.until > Instant::now() => {
                    calls.remove(state)
                }
                // Left in place for the call it belongs to: a stranger's attempt must not
                // cost its owner the call.
                _ => None,
            }
        };
        let Some(parked) = parked else {
            return Err(unknown_state());
        };
        if let Some(holders) = self.holders() {
            let state = state.to_string();
            tokio::spawn(async move { holders.forget(&state).await });
        }
        let Parked {
            binding,
            until,
            asked,
            questions,
            call,
            cancel,
        } = parked;
        let mut responses = responses.unwrap_or_default();
        for (key, question) in asked {
            let answer = match responses.remove(&key) {
                Some(response) => checked(&question.method, &question.params, response),
                None => Err(ErrorData::invalid_params(
                    format!(
                        "the client answered the call without a response to its {} request",
                        question.method
                    ),
                    None,
                )),
            };
            let _ = question.answer.send(answer);
        }
        let round = Round {
            questions,
            call: Running::Spawned(call),
            cancel,
        };
        let lifetime = until.saturating_duration_since(Instant::now());
        self.wait(binding, round, client_gone, lifetime).await
    }

    /// Waits for the call's result or its next question; parks it on a question.
    async fn wait(
        &self,
        binding: Binding,
        mut round: Round,
        client_gone: Option<CancellationToken>,
        lifetime: Duration,
    ) -> Response {
        let gone = async {
            match &client_gone {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(gone);
        let mut cancelled = false;
        let first = loop {
            tokio::select! {
                biased;
                answer = ended(&mut round.call) => return answer,
                Some(question) = round.questions.recv(), if !cancelled => break question,
                () = &mut gone, if !cancelled => {
                    // The client closed this round's stream: the call is cancelled, as a
                    // request would be, and ends (with its receipt) on its own.
                    round.cancel.cancel();
                    cancelled = true;
                }
            }
        };
        let mut asked = vec![first];
        while asked.len() < MAX_PER_ROUND {
            match round.questions.try_recv() {
                Ok(question) => asked.push(question),
                Err(_) => break,
            }
        }
        let call = match round.call {
            Running::Here(call) => {
                // Keeps the call's trace and log span wherever it runs now.
                let context = opentelemetry::Context::current();
                let span = tracing::Span::current();
                tokio::spawn(call.with_context(context).instrument(span))
            }
            Running::Spawned(call) => call,
        };
        let asked = self.park(
            binding,
            asked,
            round.questions,
            call,
            round.cancel,
            lifetime,
        );
        // Recorded before the client has the state, so any replica can find the call.
        if let (Some(holders), Some(state)) = (self.holders(), asked.request_state.as_deref()) {
            holders.record(state, lifetime + KEPT_AFTER).await;
        }
        Ok(CallToolResponse::InputRequired(asked))
    }

    /// Keeps the call under a fresh state; its question for the client.
    fn park(
        &self,
        binding: Binding,
        asked: Vec<Question>,
        questions: mpsc::Receiver<Question>,
        call: JoinHandle<Response>,
        cancel: CancellationToken,
        lifetime: Duration,
    ) -> InputRequiredResult {
        let mut requests = InputRequests::new();
        let mut keyed = Vec::with_capacity(asked.len());
        for (n, question) in asked.into_iter().enumerate() {
            let key = format!("upstream-{}", n + 1);
            match input_request(&question.method, &question.params) {
                Ok(request) => {
                    requests.insert(key.clone(), request);
                    keyed.push((key, question));
                }
                Err(error) => {
                    let _ = question.answer.send(Err(error));
                }
            }
        }
        let state = uuid::Uuid::new_v4().to_string();
        let mut calls = self.lock();
        let now = Instant::now();
        // Calls whose clients never came back go here (with the result a finished one holds):
        // parking is rare next to calls, so each one sweeps.
        calls.retain(|_, parked| parked.until > now);
        if calls.len() >= MAX_PARKED {
            drop(calls);
            for (_, question) in keyed {
                let _ = question.answer.send(Err(ErrorData::internal_error(
                    format!(
                        "{} is not relayed: {MAX_PARKED} calls wait for their clients already",
                        question.method
                    ),
                    None,
                )));
            }
            // The call goes on (its upstream got the errors); the client comes back for it.
        } else {
            calls.insert(
                state.clone(),
                Parked {
                    binding,
                    until: now + lifetime + KEPT_AFTER,
                    asked: keyed,
                    questions,
                    call,
                    cancel,
                },
            );
        }
        InputRequiredResult::new(Some(requests), Some(state))
    }

    /// Uses `holders` (the current configuration's) to tell the fleet which calls are here.
    pub fn set_holders(&self, holders: Option<Arc<Holders>>) {
        *self.holders.write().unwrap_or_else(|p| p.into_inner()) = holders;
    }

    /// The fleet's record of parked calls, if the configuration shares state.
    pub fn holders(&self) -> Option<Arc<Holders>> {
        self.holders
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether `state` names a call parked here (it may still be refused for another binding).
    pub fn holds(&self, state: &str) -> bool {
        self.lock().contains_key(state)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The call's answer, when it ends.
async fn ended(call: &mut Running) -> Response {
    match call {
        Running::Here(call) => call.await,
        Running::Spawned(call) => call.await.unwrap_or_else(|error| {
            Err(ErrorData::internal_error(
                format!("the parked call ended abnormally: {error}"),
                None,
            ))
        }),
    }
}

/// The upstream's request as an entry of `inputRequests`.
fn input_request(method: &str, params: &Value) -> Result<InputRequest, ErrorData> {
    let request = serde_json::json!({"method": method, "params": params});
    serde_json::from_value(request).map_err(|error| {
        ErrorData::invalid_params(format!("{method} with malformed params: {error}"), None)
    })
}

/// The client's response to `method`, parsed as the result that request expects (and an
/// accepted elicitation checked against its `requestedSchema`), as the upstream gets it.
fn checked(method: &str, params: &Value, response: Value) -> Result<Value, ErrorData> {
    #[allow(deprecated)] // sampling and roots: deprecated from 2026-07-28 (SEP-2577)
    let parsed = match method {
        "sampling/createMessage" => {
            serde_json::from_value::<rmcp::model::CreateMessageResult>(response)
                .and_then(serde_json::to_value)
        }
        "elicitation/create" => serde_json::from_value::<rmcp::model::ElicitResult>(response)
            .and_then(serde_json::to_value),
        "roots/list" => serde_json::from_value::<rmcp::model::ListRootsResult>(response)
            .and_then(serde_json::to_value),
        other => return Err(crate::upstream::call_relay::not_relayed(other)),
    };
    let answer = parsed.map_err(|error| {
        ErrorData::invalid_params(
            format!("the client's response to {method} is malformed: {error}"),
            None,
        )
    })?;
    if method == "elicitation/create" {
        crate::upstream::call_relay::check_elicitation(params, &answer)?;
    }
    Ok(answer)
}

/// The error for a `requestState` this replica does not hold for the call.
pub fn unknown_state() -> ErrorData {
    ErrorData::invalid_params(
        "requestState names no call waiting for this client here: it expired, was answered \
         already, belongs to another call, or was issued by another replica",
        None,
    )
}

#[cfg(test)]
mod tests;
