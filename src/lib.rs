//! narrowgate: an MCP gateway that publishes only contract-narrowed tools and checks every call
//! and every result against its contract.
//!
//! The modules are the concepts of the documentation (docs/, ARCHITECTURE.md), listed in the order
//! a request meets them.

// A request, in the order it meets them.

/// The HTTP edge: connections, capacity, Host/Origin, sessions, authentication layers, browsers.
pub(crate) mod edge;
/// What one request carries from the edge to its handler, parsed once, or the rejection it gets.
pub(crate) mod request;
/// The configuration version a request is served by, and reload.
pub(crate) mod runtime;
/// The MCP methods: rmcp's handler, the direct path, resources, prompts, relays.
pub(crate) mod mcp;
/// The life of one `tools/call`: authorise, validate, limit, call upstream, validate, record.
pub(crate) mod pipeline;
/// Callers, their roles and scopes, and rate limits.
pub(crate) mod policy;
/// Tool search: `search_tools` and `call_tool` for callers with `discovery: search`.
pub(crate) mod discovery;
/// Contracts: loading, narrowing against an upstream's tools, enforcing.
pub(crate) mod contract;
/// Calls that wait for a user or an approver.
pub(crate) mod approvals;
/// Stateless calls answered by a question and resumed.
pub(crate) mod mrtr;
/// Upstream MCP servers: connecting, supervising, calling.
pub(crate) mod upstream;
/// The receipt of every call.
pub(crate) mod receipts;
/// Traces, metrics and logs.
pub(crate) mod telemetry;

// Beside every request: what outlives a version, the page about them, and what starts them.

/// What outlives a configuration version and is shared by replicas: dedupe, sessions, levels.
pub(crate) mod state;
/// The status page.
pub(crate) mod status;
/// The configuration file.
pub(crate) mod config;
/// The command line.
pub(crate) mod cli;

/// The command line's entry point (`src/main.rs`).
pub use cli::main;

/// What the integration tests, the fuzz targets and the benchmarks reach inside the crate, and
/// nothing else: every module above is private to the crate, so the compiler reports code that
/// nothing uses, and a test that needs more says so here.
pub mod harness {
    pub use crate::config::{Config, LoadError, yaml};
    pub use crate::contract::digest::sha256_of;
    pub use crate::contract::enforce::{self, OutputSchemas};
    pub use crate::contract::errors::published_output;
    pub use crate::contract::narrow::{Verdict, narrow};
    pub use crate::contract::schema;
    pub use crate::contract::{ContractFile, ContractSet, valid_tool_name};
    pub use crate::mcp::direct::qualifies as direct_call_qualifies;
    pub use crate::receipts::format_utc_millis;
    pub use crate::receipts::postgres::{MIGRATIONS, SCHEMA_VERSION};
    pub use crate::runtime::catalog::Catalog;
    pub use crate::upstream::h1::replay::read_answer;
    pub use crate::upstream::sse::EventSplitter;
    pub use crate::upstream::{Snapshot, Status};
}

#[cfg(test)]
mod architecture;
