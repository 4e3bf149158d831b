//! narrowgate: an MCP gateway that publishes only contract-narrowed tools and checks every call
//! and every result against its contract.
//!
//! Modules follow the concepts of the documentation (docs/, ARCHITECTURE.md): [`config`], [`contract`] (loading, narrowing,
//! enforcement), [`upstream`] (clients and their supervision), [`policy`] (callers and what they
//! may use), [`gateway`] (the MCP server and the call pipeline), [`state`] (what replicas share
//! through Redis) and [`cli`].

pub mod cli;
pub mod config;
pub mod contract;
pub mod gateway;
pub mod policy;
pub mod receipts;
pub mod state;
pub mod telemetry;
pub mod upstream;
