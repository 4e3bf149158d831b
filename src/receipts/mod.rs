//! Receipts (SPEC §4.11): one durable record per `tools/call`, whatever its outcome.

use serde::Serialize;

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
    /// A non-idempotent call was sent but its fate is unknown (timed out or connection lost).
    Unknown,
    /// The upstream was unavailable, failed, or answered with a protocol error.
    UpstreamError,
}

impl Outcome {
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
