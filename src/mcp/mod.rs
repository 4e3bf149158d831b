//! The MCP methods a client calls: rmcp's handler ([`handler`]), the gateway's own answer to
//! plain `tools/call` requests ([`direct`]), and what both share: the hand-over of a
//! `tools/call` to the pipeline ([`tools_call`]), resources, prompts, completion, resource
//! subscriptions, and what travels between client and upstream besides a tool's arguments and
//! result ([`relay`]).

pub mod completion;
pub mod direct;
pub mod handler;
pub mod prompts;
pub mod relay;
pub mod resources;
pub mod subscriptions;
pub mod tools_call;
pub mod version;
