//! The integration tests with third-party peers: the official MCP SDK clients, the MCP project's servers, the conformance suite and an OTLP collector.
//!
//! One test binary per kind of outside peer: each compiles the shared helpers (`tests/common`) once.

#[path = "../cli.rs"]
mod cli;
#[path = "../common/mod.rs"]
mod common;
#[path = "../conformance.rs"]
mod conformance;
#[path = "../connect.rs"]
mod connect;
#[path = "../discovery.rs"]
mod discovery;
#[path = "../fidelity.rs"]
mod fidelity;
#[path = "../gateway.rs"]
mod gateway;
#[path = "../library.rs"]
mod library;
#[allow(dead_code)] // the OTLP collector; each test uses a part of it
#[path = "../otel/mod.rs"]
mod otel;
#[path = "../peers.rs"]
mod peers;
#[path = "../preconditions.rs"]
mod preconditions;
#[path = "../resources.rs"]
mod resources;
#[path = "../stdio_clients.rs"]
mod stdio_clients;
#[path = "../telemetry.rs"]
mod telemetry;
#[path = "../typed_errors.rs"]
mod typed_errors;
