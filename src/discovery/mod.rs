//! Tool search (docs/discovery.md): a caller with `discovery: search` is listed, instead of every
//! tool, the meta-tools `search_tools` and `call_tool` (plus its `always` tools). A search ranks
//! only the tools that caller may call ([`index`]) and says of each whether it can be called now;
//! `call_tool` is the named tool's own call, through the whole pipeline. Search is never
//! authority: what a search returns is what the caller could call anyway.
//!
//! This module holds what a search is (its arguments, its answer, the meta-tools' definitions);
//! the pipeline asks the catalog and the limits what it needs to fill one in.

pub mod index;

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::contract::errors::published_output;

/// The meta-tool that searches the caller's tools.
pub const SEARCH_TOOLS: &str = "search_tools";
/// The meta-tool that calls a tool found by searching.
pub const CALL_TOOL: &str = "call_tool";
/// How many tools a search answers unless it asks for another number.
pub const DEFAULT_LIMIT: usize = 10;
/// The most tools one search answers.
pub const MAX_LIMIT: usize = 50;

/// `search_tools`' description. Written for a model that sees only these two tools and a few
/// others: it says first that the other tools exist and are found here (a generic "search"
/// description is one models never call), then how to write a query (a task, in a few words), what
/// comes back, and what to do next. Tested by a scripted agent that may only call what a search
/// returned (tests/discovery.rs).
const SEARCH_DESCRIPTION: &str = "Find the tools you can use for a task. Only a few tools are \
    listed up front: every other tool you may use is found with this search. Describe what you \
    want to do in a few words (\"read a file\", \"recent git commits\", \"current time in \
    Tokyo\"). The answer lists the matching tools, best first, each with its name, description, \
    input schema and whether you can call it now. Then call one with call_tool, giving its exact \
    name and arguments that match its input schema.";

/// `call_tool`'s description: what it is for, and where names come from.
const CALL_DESCRIPTION: &str = "Call a tool found with search_tools: give its exact name and \
    its arguments, matching the input schema the search returned. The answer is that tool's own \
    answer.";

/// The definitions of the two meta-tools, as `tools/list` publishes them.
pub fn meta_tools() -> [Tool; 2] {
    let search_input = json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 500,
                "description": "What you want to do, in a few words."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                "description": format!("How many tools to return (default {DEFAULT_LIMIT}).")}
        },
        "required": ["query"],
        "additionalProperties": false
    });
    let found = json!({
        "type": "object",
        "properties": {
            "tools": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "inputSchema": {"type": "object"},
                    "availability": {"anyOf": [
                        {"const": "executable"},
                        {"type": "object", "properties": {
                            "status": {"const": "blocked"}, "reason": {"type": "string"}},
                         "required": ["status", "reason"]}
                    ]}
                },
                "required": ["name", "inputSchema", "availability"]
            }}
        },
        "required": ["tools"]
    });
    let call_input = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$",
                "description": "The tool's exact name, as search_tools returned it."},
            "arguments": {"type": "object",
                "description": "The tool's arguments, matching its input schema."}
        },
        "required": ["name"],
        "additionalProperties": false
    });
    let object = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
    let mut search = Tool::new(SEARCH_TOOLS, SEARCH_DESCRIPTION, object(search_input));
    search.title = Some("Search tools".into());
    search.output_schema = found.as_object().map(|o| Arc::new(published_output(o)));
    search.annotations = Some(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    );
    let mut call = Tool::new(CALL_TOOL, CALL_DESCRIPTION, object(call_input));
    call.title = Some("Call a tool".into());
    [search, call]
}

/// A `search_tools` call's arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct SearchArgs {
    pub query: String,
    pub limit: usize,
}

impl SearchArgs {
    /// The arguments, or what is wrong with them (for an `invalid_arguments` answer).
    pub fn parse(arguments: Option<&JsonObject>) -> Result<SearchArgs, String> {
        let empty = Map::new();
        let arguments = arguments.unwrap_or(&empty);
        if let Some(other) = arguments.keys().find(|k| *k != "query" && *k != "limit") {
            return Err(format!(
                "search_tools takes `query` and `limit`, not `{}`",
                crate::policy::names::shown_tool(other)
            ));
        }
        let query = match arguments.get("query") {
            Some(Value::String(q)) if !q.trim().is_empty() && q.chars().count() <= 500 => q.clone(),
            _ => return Err("search_tools needs a `query`: a few words (at most 500 characters) saying what you want to do".into()),
        };
        let limit = match arguments.get("limit") {
            None => DEFAULT_LIMIT,
            Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n @ 1..=MAX_LIMIT) => n,
                _ => return Err(format!("`limit` is a whole number from 1 to {MAX_LIMIT}")),
            },
        };
        Ok(SearchArgs { query, limit })
    }
}

/// A `call_tool` call's arguments: the tool to call and its own arguments.
#[derive(Debug, PartialEq)]
pub struct CallArgs {
    pub name: String,
    pub arguments: Option<JsonObject>,
}

impl CallArgs {
    pub fn parse(arguments: Option<JsonObject>) -> Result<CallArgs, String> {
        let mut arguments = arguments.unwrap_or_default();
        if let Some(other) = arguments.keys().find(|k| *k != "name" && *k != "arguments") {
            return Err(format!(
                "call_tool takes `name` and `arguments`, not `{}`",
                crate::policy::names::shown_tool(other)
            ));
        }
        let name = match arguments.remove("name") {
            Some(Value::String(name)) => name,
            _ => {
                return Err(
                    "call_tool needs the `name` of a tool, as search_tools returned it".into(),
                );
            }
        };
        let arguments = match arguments.remove("arguments") {
            None | Some(Value::Null) => None,
            Some(Value::Object(object)) => Some(object),
            Some(_) => return Err("`arguments` is an object: the tool's arguments".into()),
        };
        Ok(CallArgs { name, arguments })
    }
}

/// Whether a found tool can be called now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Executable,
    /// Why a call would not go through now (the upstream is down, an approval is needed, a
    /// scope is missing, a rate limit refuses it for a while).
    Blocked(String),
}

impl Availability {
    fn to_json(&self) -> Value {
        match self {
            Availability::Executable => json!("executable"),
            Availability::Blocked(reason) => json!({"status": "blocked", "reason": reason}),
        }
    }
}

/// The text of a tool the index ranks by: its contract's description without the published
/// `Errors:` line, then what its arguments' descriptions say (a model's words often name an
/// argument: "in Tokyo" finds a `timezone` described as "an IANA time zone such as Asia/Tokyo").
pub fn indexed_text(description: Option<&str>, input: &JsonObject) -> String {
    let mut text = description.unwrap_or_default().to_string();
    // A description shared by several arguments (`source_timezone`, `target_timezone`) counts
    // once: repeating it would rank the tool by how many arguments it has.
    let mut seen: Vec<&str> = Vec::new();
    if let Some(Value::Object(properties)) = input.get("properties") {
        for (name, schema) in properties {
            text.push(' ');
            text.push_str(name);
            if let Some(Value::String(d)) = schema.get("description")
                && !seen.contains(&d.as_str())
            {
                seen.push(d);
                text.push(' ');
                text.push_str(d);
            }
        }
    }
    text
}

/// The answer to a search: each found tool's published definition and availability, best first,
/// as `structuredContent` and as its JSON text.
pub fn answer<'a>(found: impl IntoIterator<Item = (&'a Tool, Availability)>) -> CallToolResult {
    let tools: Vec<Value> = found
        .into_iter()
        .map(|(tool, availability)| {
            let mut item = Map::new();
            item.insert("name".into(), tool.name.as_ref().into());
            if let Some(title) = &tool.title {
                item.insert("title".into(), title.clone().into());
            }
            if let Some(description) = &tool.description {
                item.insert("description".into(), description.as_ref().into());
            }
            item.insert(
                "inputSchema".into(),
                Value::Object(tool.input_schema.as_ref().clone()),
            );
            item.insert("availability".into(), availability.to_json());
            Value::Object(item)
        })
        .collect();
    let structured = json!({ "tools": tools });
    let mut result = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
    result.structured_content = Some(structured);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(v: Value) -> JsonObject {
        v.as_object().cloned().expect("object")
    }

    /// Proves: search arguments are checked (a query of words, a bounded limit, nothing else),
    /// each refusal saying what to send instead.
    #[test]
    fn search_arguments_are_checked() {
        let ok = SearchArgs::parse(Some(&object(json!({"query": "read a file"})))).expect("ok");
        assert_eq!(ok.limit, DEFAULT_LIMIT);
        for bad in [
            json!({}),
            json!({"query": "  "}),
            json!({"query": "x", "limit": 0}),
            json!({"query": "x", "limit": 51}),
            json!({"query": "x", "extra": 1}),
        ] {
            assert!(
                SearchArgs::parse(Some(&object(bad.clone()))).is_err(),
                "{bad}"
            );
        }
    }

    /// Proves: `call_tool` names the tool and passes its arguments on unchanged; anything else
    /// is refused.
    #[test]
    fn call_arguments_name_the_tool() {
        let call = CallArgs::parse(Some(object(
            json!({"name": "git_log", "arguments": {"n": 3}}),
        )))
        .expect("ok");
        assert_eq!(call.name, "git_log");
        assert_eq!(call.arguments, Some(object(json!({"n": 3}))));
        assert!(CallArgs::parse(Some(object(json!({"arguments": {}})))).is_err());
        assert!(CallArgs::parse(Some(object(json!({"name": "t", "arguments": [1]})))).is_err());
    }

    /// Proves: the search answer's structured content matches `search_tools`' published output
    /// schema, which clients that validate (the TypeScript SDK) check it against.
    #[test]
    fn the_answer_matches_the_published_output_schema() {
        let [search, _] = meta_tools();
        let schema = Value::Object(search.output_schema.as_deref().cloned().expect("schema"));
        let validator = jsonschema::validator_for(&schema).expect("compiles");
        let tool = Tool::new("t", "d", Arc::new(object(json!({"type": "object"}))));
        let answer = answer([
            (&tool, Availability::Executable),
            (
                &tool,
                Availability::Blocked("upstream `u` is unavailable".into()),
            ),
        ]);
        let structured = answer.structured_content.expect("structured");
        assert!(validator.is_valid(&structured), "{structured}");
    }
}
