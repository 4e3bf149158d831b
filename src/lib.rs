//! narrowgate: an MCP gateway that publishes only contract-narrowed tools and checks every call
//! and every result against its contract.
//!
//! The modules are the concepts of the documentation (docs/, ARCHITECTURE.md), listed in the order
//! a request meets them.

/// Calls that wait for a user or an approver.
pub mod approvals;
/// The command line.
pub mod cli;
/// The configuration file.
pub mod config;
/// Contracts: loading, narrowing against an upstream's tools, enforcing.
pub mod contract;
/// The HTTP edge: connections, capacity, Host/Origin, sessions, authentication layers, browsers.
pub mod edge;
/// The MCP methods: rmcp's handler, the direct path, resources, prompts, relays.
pub mod mcp;
/// Stateless calls answered by a question and resumed.
pub mod mrtr;
/// The life of one `tools/call`: authorise, validate, limit, call upstream, validate, record.
pub mod pipeline;
/// Callers, their roles and scopes, and rate limits.
pub mod policy;
/// The receipt of every call.
pub mod receipts;
/// What one request carries from the edge to its handler, parsed once, or the rejection it gets.
pub mod request;
/// The configuration version a request is served by, and reload.
pub mod runtime;
/// What outlives a configuration version and is shared by replicas: dedupe, sessions, levels.
pub mod state;
/// The status page.
pub mod status;
/// Traces, metrics and logs.
pub mod telemetry;
/// Upstream MCP servers: connecting, supervising, calling.
pub mod upstream;

#[cfg(test)]
mod architecture;
