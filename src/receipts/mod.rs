//! Receipts (docs/semantics.md): one durable record per `tools/call`, whatever its outcome.
//!
//! The pipeline describes each finished call as a [`Call`]; [`store::ReceiptLog`] turns it into a
//! [`Receipt`] (redacting the arguments first) and commits it to an embedded SQLite database before
//! the answer leaves the gateway. [`query`] reads that database for `narrowgate receipts`, also
//! while the gateway runs.
//!
//! Where the database lives: `receipts.path` in the configuration, relative to the configuration
//! file, or a PostgreSQL database shared by replicas with `receipts.url` ([`postgres`]). Without a `receipts` block it is still written, to `data/receipts.db` next to the
//! configuration file ([`DEFAULT_PATH`]): every call leaves a receipt, so there is no "off" switch.
//! Without `retention`, receipts are kept until an operator deletes them.
//!
//! Arguments are digested only under a contract. A call of a name with no contract (a tool that
//! does not exist, or a made-up name) has nothing that says which of its arguments are secret,
//! so nothing of them is recorded, not even their digest: a plain SHA-256 of unredacted
//! arguments gives back any low-entropy secret in them (a PIN, a short password, a yes/no) to
//! whoever can read the receipts and try the candidates. Such a receipt's `arguments_digest` is
//! null (an empty text in the database, whose column predates this rule). A keyed digest would
//! resist that guessing, but it would need a key kept secret from the receipts' readers and
//! stable across restarts to be of any use; no digest at all is the simpler promise.

mod error;
pub mod postgres;
pub mod query;
pub mod store;
pub mod traffic;

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use crate::config::Config;
use crate::contract::ToolContract;
use crate::contract::digest::sha256_of;

pub use error::ReceiptError;
pub use store::ReceiptLog;

/// Which receipts to return. Every set field must match.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub tool: Option<String>,
    pub caller: Option<String>,
    pub outcome: Option<Outcome>,
    /// Only receipts of calls that arrived within this long before now.
    pub since: Option<Duration>,
    /// Only the most recent N.
    pub limit: Option<u64>,
}

/// The database used when the configuration has no `receipts` block, relative to its file.
pub const DEFAULT_PATH: &str = "data/receipts.db";

/// What replaces the value at each of a contract's `redact` pointers before the arguments are
/// digested or stored. Fixed, so that calls differing only in a redacted value share a digest.
pub const REDACTED: &str = "[redacted]";

/// How a `tools/call` ended. Receipts, logs and telemetry all use these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The upstream answered and the result is within the contract.
    Ok,
    /// The upstream answered with a tool error (`isError: true`), passed on.
    ToolError,
    /// The caller may not use the tool (or it does not exist, or is disabled).
    Denied,
    /// The arguments are outside the contract or the upstream schema; nothing was sent.
    RejectedInput,
    /// The result is outside the contract; none of it was returned.
    RejectedOutput,
    /// A rate limit refused the call before the upstream.
    RateLimited,
    /// An idempotent call did not complete in time.
    Timeout,
    /// A non-idempotent call was sent and no valid answer came back (timed out, connection
    /// lost, an answer that is not a tool result): it may have taken effect.
    Unknown,
    /// The upstream was unavailable, failed, or answered with a protocol error.
    UpstreamError,
}

impl Outcome {
    /// The outcome called `name` (as written by [`as_str`](Self::as_str)), if any.
    pub fn parse(name: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Denied => "denied",
            Outcome::RejectedInput => "rejected_input",
            Outcome::RejectedOutput => "rejected_output",
            Outcome::RateLimited => "rate_limited",
            Outcome::Timeout => "timeout",
            Outcome::Unknown => "unknown",
            Outcome::UpstreamError => "upstream_error",
        }
    }

    /// Every outcome, for CLI validation and metrics.
    pub const ALL: [Outcome; 9] = [
        Outcome::Ok,
        Outcome::ToolError,
        Outcome::Denied,
        Outcome::RejectedInput,
        Outcome::RejectedOutput,
        Outcome::RateLimited,
        Outcome::Timeout,
        Outcome::Unknown,
        Outcome::UpstreamError,
    ];
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The receipt settings of a configuration, with the documented defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The SQLite database file (absolute, or relative to the working directory); unused when
    /// `url` is set.
    pub path: PathBuf,
    /// The PostgreSQL database (`receipts.url`), instead of the SQLite file.
    pub url: Option<String>,
    /// Keep the redacted arguments, not only their digest.
    pub store_arguments: bool,
    /// Receipts older than this are deleted; `None` keeps them forever.
    pub retention: Option<Duration>,
    /// fsync each batch before answering (`receipts.fsync`).
    pub fsync: bool,
}

impl Settings {
    /// `config.receipts`, or the defaults: [`DEFAULT_PATH`] next to the configuration file,
    /// digests only, kept forever.
    pub fn of(config: &Config) -> Settings {
        match &config.receipts {
            // The loader already resolved `path` against the configuration file.
            Some(r) => Settings {
                path: r
                    .path
                    .clone()
                    .unwrap_or_else(|| config.base_dir().join(DEFAULT_PATH)),
                url: r.url.clone(),
                store_arguments: r.store_arguments,
                retention: r.retention.map(|d| d.0),
                fsync: r.fsync,
            },
            None => Settings {
                path: config.base_dir().join(DEFAULT_PATH),
                url: None,
                store_arguments: false,
                retention: None,
                fsync: false,
            },
        }
    }
}

/// How a call's approval went (`approval: user` or `approver`), for its receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRecord {
    /// The pending approval's id (`approval: approver`); none for a user's approval.
    pub id: Option<String>,
    /// `approved`, `denied`, `timeout`, `abandoned` (the client went away while it waited) or,
    /// for a user, `accepted`, `declined`, `cancelled`, `unsupported`.
    pub decision: &'static str,
    /// Who decided: the approver's caller name, or `user`.
    pub approver: Option<String>,
    /// How long the call waited for the decision.
    pub wait: Duration,
}

/// What the pipeline knows about one finished `tools/call`.
#[derive(Debug)]
pub struct Call<'a> {
    pub caller: &'a str,
    /// The tool name the client asked for (it may not exist).
    pub tool: &'a str,
    /// The contract of that name, when there is one (also for calls that were denied).
    pub contract: Option<&'a ToolContract>,
    /// The arguments as the client sent them; redacted here before anything is kept.
    pub arguments: &'a Value,
    pub outcome: Outcome,
    /// How many times the upstream was called (0: the call never reached it).
    pub attempts: u32,
    /// The answer was a recorded result (`dedupe`), not a new execution.
    pub replayed: bool,
    /// When the call arrived.
    pub started: SystemTime,
    pub duration: Duration,
    /// The W3C trace id of the call's span, once telemetry provides one.
    pub trace_id: Option<String>,
    /// Why the call was refused, when a rule of the gateway said so in words (the precondition
    /// that denied it: `precondition N: MESSAGE`).
    pub reason: Option<&'a str>,
    /// How its approval went, for a tool that needs one.
    pub approval: Option<&'a ApprovalRecord>,
    /// The typed error the call answered (`invalid_arguments`, `rate_limited`, a declared type…).
    pub error_type: Option<&'a str>,
    /// The recovery taken after a failure (`on_error`): the fallback tool's name, or `degrade`.
    pub fallback: Option<&'a str>,
    /// The answer came from the result cache (`cache:`).
    pub cached: bool,
}

/// One row of the receipts table, as written and as `narrowgate receipts --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    /// A UUIDv7: unique, and sorts by time.
    pub id: String,
    /// RFC 3339 UTC with milliseconds (`2025-01-31T12:00:00.123Z`): sorts as text.
    pub time: String,
    pub caller: String,
    pub tool: String,
    pub upstream: Option<String>,
    pub upstream_tool: Option<String>,
    pub contract_digest: Option<String>,
    /// `sha256:` of the canonical JSON of the redacted arguments; `None` for a call without a
    /// contract (see the module's documentation).
    pub arguments_digest: Option<String>,
    pub outcome: String,
    pub attempts: u32,
    pub replayed: bool,
    pub duration_ms: f64,
    pub trace_id: Option<String>,
    /// The redacted arguments, only with `store_arguments: true`.
    pub arguments: Option<Value>,
    /// Why the call was refused, when a rule said so in words (`precondition N: MESSAGE`).
    pub reason: Option<String>,
    /// The pending approval's id (`approval: approver`).
    pub approval_id: Option<String>,
    /// How the approval ended (`approved`, `denied`, `timeout`, `accepted`, `declined`, …).
    pub approval_decision: Option<String>,
    /// Who decided: an approver's caller name, or `user`.
    pub approver: Option<String>,
    /// How long the call waited for its approval, in milliseconds.
    pub approval_wait_ms: Option<f64>,
    /// The typed error the call answered, if it failed (schema 5; `None` before).
    pub error_type: Option<String>,
    /// The fallback taken after a failure: the tool's name, or `degrade`.
    pub fallback: Option<String>,
    /// Answered from the result cache.
    pub cached: bool,
}

impl Receipt {
    /// The receipt of `call`. Arguments are redacted with the contract's pointers before they are
    /// digested or kept; the arguments of a call with no contract (an unknown tool) are neither
    /// kept nor digested, because nothing says which of their values are secret.
    pub fn of(call: &Call<'_>, store_arguments: bool) -> Receipt {
        // Copied only when something is redacted or kept.
        let redacted = match call.contract {
            Some(contract) if !contract.redact.is_empty() => {
                Cow::Owned(redact(call.arguments, &contract.redact))
            }
            _ => Cow::Borrowed(call.arguments),
        };
        let millis = call
            .started
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        Receipt {
            // Written when the call ends, and increasing within the process (the uuid crate's
            // shared context), so ids sort in the order receipts were written and the table needs
            // no other index; a receipt's id is never earlier than its `time`.
            id: uuid::Uuid::now_v7().to_string(),
            time: format_utc_millis(millis),
            caller: call.caller.to_string(),
            tool: call.tool.to_string(),
            upstream: call.contract.map(|c| c.upstream.clone()),
            upstream_tool: call.contract.map(|c| c.upstream_tool.clone()),
            contract_digest: call.contract.map(|c| c.digest.clone()),
            arguments_digest: call.contract.map(|_| sha256_of(redacted.as_ref())),
            outcome: call.outcome.as_str().to_string(),
            attempts: call.attempts,
            replayed: call.replayed,
            // Microsecond precision, printed without float noise.
            duration_ms: call.duration.as_micros() as f64 / 1000.0,
            trace_id: call.trace_id.clone(),
            arguments: (store_arguments && call.contract.is_some()).then(|| redacted.into_owned()),
            reason: call.reason.map(str::to_string),
            approval_id: call.approval.and_then(|a| a.id.clone()),
            approval_decision: call.approval.map(|a| a.decision.to_string()),
            approver: call.approval.and_then(|a| a.approver.clone()),
            approval_wait_ms: call.approval.map(|a| a.wait.as_micros() as f64 / 1000.0),
            error_type: call.error_type.map(str::to_string),
            fallback: call.fallback.map(str::to_string),
            cached: call.cached,
        }
    }
}

/// `arguments` with the value at each JSON pointer replaced by [`REDACTED`]. Pointers that do not
/// resolve (the argument was not sent) are skipped.
pub fn redact(arguments: &Value, pointers: &[String]) -> Value {
    let mut redacted = arguments.clone();
    for pointer in pointers {
        if let Some(slot) = redacted.pointer_mut(pointer) {
            *slot = Value::String(REDACTED.to_string());
        }
    }
    redacted
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC (`1970-01-01T00:00:00.000Z`), the format of
/// the `time` column. Fixed width, so text order is time order (years 0 to 9999).
pub fn format_utc_millis(millis: i64) -> String {
    let days = millis.div_euclid(86_400_000);
    let of_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3_600_000,
        of_day / 60_000 % 60,
        of_day / 1000 % 60,
        of_day % 1000
    )
}

/// The lowest receipt id written at `millis` or later, in text order: a UUIDv7 starts with its
/// 48-bit millisecond timestamp in lowercase hex (`tttttttt-tttt-7…`). Since a receipt is written
/// after its call arrived, every call that arrived from `millis` on has an id at or above it.
pub fn id_floor(millis: i64) -> String {
    let millis = millis.clamp(0, (1 << 48) - 1);
    format!("{:08x}-{:04x}", millis >> 16, millis & 0xffff)
}

/// Milliseconds since the Unix epoch, `ago` before now.
pub fn millis_ago(ago: Duration) -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    now.saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX))
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day), proleptic
/// Gregorian. Avoids a date-time dependency for one formatting need.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Proves: receipt ids increase in the order receipts are written, even within one
    /// millisecond, and `id_floor(t)` separates ids of millisecond `t` and later from earlier
    /// ones, so the id range that `--since` and retention use loses no receipt.
    #[test]
    fn ids_increase_and_floors_cut_at_the_millisecond() {
        let call = Call {
            caller: "a",
            tool: "t",
            contract: None,
            arguments: &Value::Null,
            outcome: Outcome::Ok,
            attempts: 1,
            replayed: false,
            started: SystemTime::now(),
            duration: Duration::ZERO,
            trace_id: None,
            reason: None,
            approval: None,
            error_type: None,
            fallback: None,
            cached: false,
        };
        let ids: Vec<String> = (0..1000).map(|_| Receipt::of(&call, false).id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase");
        let at = |millis: u64| {
            let ts = uuid::Timestamp::from_unix(
                uuid::NoContext,
                millis / 1000,
                (millis % 1000) as u32 * 1_000_000,
            );
            uuid::Uuid::new_v7(ts).to_string()
        };
        let t = 1_764_500_000_123_u64;
        let (before, exact, after) = (at(t - 1), at(t), at(t + 1));
        let floor = id_floor(t as i64);
        assert!(before < floor, "{before} < {floor}");
        assert!(exact >= floor && after >= floor);
        assert!(after >= id_floor(t as i64 + 1) && exact < id_floor(t as i64 + 1));
    }

    /// Proves: a call without a contract leaves no digest of its arguments (a SHA-256 of a short
    /// secret is found again by trying candidates), and no arguments even when they are kept.
    #[test]
    fn a_call_without_a_contract_leaves_no_arguments_digest() {
        let arguments = json!({"pin": "1234"});
        let call = Call {
            caller: "a",
            tool: "no_such_tool",
            contract: None,
            arguments: &arguments,
            outcome: Outcome::Denied,
            attempts: 0,
            replayed: false,
            reason: None,
            started: SystemTime::now(),
            duration: Duration::ZERO,
            trace_id: None,
            approval: None,
            error_type: None,
            fallback: None,
            cached: false,
        };
        let receipt = Receipt::of(&call, true);
        assert_eq!(receipt.arguments_digest, None);
        assert_eq!(receipt.arguments, None);
        assert!(
            !serde_json::to_string(&receipt)
                .expect("json")
                .contains(&sha256_of(&arguments))
        );
    }

    #[test]
    fn times_are_rfc3339_utc_with_millis() {
        assert_eq!(format_utc_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_utc_millis(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(
            format_utc_millis(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            format_utc_millis(4_102_444_799_999),
            "2099-12-31T23:59:59.999Z"
        );
        assert!(format_utc_millis(1_000) < format_utc_millis(60_000));
    }

    #[test]
    fn redaction_replaces_only_the_pointed_values() {
        let args = json!({"token": "s3cret", "nested": {"key": 1}, "list": ["a", "b"], "keep": 2});
        let pointers = ["/token", "/nested/key", "/list/1", "/absent"].map(String::from);
        assert_eq!(
            redact(&args, &pointers),
            json!({"token": REDACTED, "nested": {"key": REDACTED}, "list": ["a", REDACTED], "keep": 2})
        );
    }

    #[test]
    fn outcomes_parse_back_from_their_names() {
        for outcome in Outcome::ALL {
            assert_eq!(Outcome::parse(outcome.as_str()), Some(outcome));
        }
        assert_eq!(Outcome::parse("okay"), None);
    }
}
