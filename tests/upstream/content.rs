//! Resources, resource templates, prompts and completions, under the names the official MCP
//! conformance suite's server scenarios use (`test://static-text`, `test_simple_prompt`, ...).
//! Unknown resources and prompts are `-32602` errors, the answer SEP-2164 settled on.

use rmcp::ErrorData;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult,
};
use serde_json::{Value, json};

use crate::conformance::{RED_PIXEL_PNG, wire};

pub const STATIC_TEXT: &str = "test://static-text";
pub const STATIC_BINARY: &str = "test://static-binary";
pub const WATCHED: &str = "test://watched-resource";
const TEMPLATE: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";
/// Longest `{id}` the template accepts, so a read cannot make the answer arbitrarily large.
const MAX_ID_LEN: usize = 64;

pub fn resources() -> Result<ListResourcesResult, ErrorData> {
    wire(json!({"resources": [
        {
            "uri": STATIC_TEXT,
            "name": "static-text",
            "description": "A fixed text resource",
            "mimeType": "text/plain"
        },
        {
            "uri": STATIC_BINARY,
            "name": "static-binary",
            "description": "A fixed 1x1 PNG image",
            "mimeType": "image/png"
        },
        {
            "uri": WATCHED,
            "name": "watched-resource",
            "description": "A resource clients can subscribe to",
            "mimeType": "text/plain"
        }
    ]}))
}

pub fn templates() -> Result<ListResourceTemplatesResult, ErrorData> {
    wire(json!({"resourceTemplates": [{
        "uriTemplate": TEMPLATE,
        "name": "template",
        "description": "JSON data for the given id",
        "mimeType": "application/json"
    }]}))
}

/// Whether `uri` names a resource this server has (for `resources/subscribe`).
pub fn exists(uri: &str) -> bool {
    [STATIC_TEXT, STATIC_BINARY, WATCHED].contains(&uri) || template_id(uri).is_some()
}

fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix(TEMPLATE_PREFIX)?
        .strip_suffix(TEMPLATE_SUFFIX)?;
    let valid = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    valid.then_some(id)
}

pub fn not_found(what: &str, name: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!("{what} not found: {name}"),
        Some(json!({"uri": name})),
    )
}

pub fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = match uri {
        STATIC_TEXT => json!({
            "uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."
        }),
        STATIC_BINARY => json!({"uri": uri, "mimeType": "image/png", "blob": RED_PIXEL_PNG}),
        WATCHED => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"})
        }
        _ => match template_id(uri) {
            Some(id) => json!({
                "uri": uri, "mimeType": "application/json",
                "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string()
            }),
            None => return Err(not_found("Resource", uri)),
        },
    };
    wire(json!({"contents": [contents]}))
}

pub fn prompts() -> Result<ListPromptsResult, ErrorData> {
    let arg = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    wire(json!({"prompts": [
        {"name": "test_simple_prompt", "description": "A prompt without arguments"},
        {
            "name": "test_prompt_with_arguments",
            "description": "A prompt that quotes its two arguments",
            "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]
        },
        {
            "name": "test_prompt_with_embedded_resource",
            "description": "A prompt that embeds the resource it is given",
            "arguments": [arg("resourceUri", "URI of the resource to embed")]
        },
        {"name": "test_prompt_with_image", "description": "A prompt with an image"}
    ]}))
}

/// A required prompt argument, or the `-32602` error naming it.
fn argument<'a>(
    arguments: Option<&'a serde_json::Map<String, Value>>,
    prompt: &str,
    key: &str,
) -> Result<&'a str, ErrorData> {
    arguments
        .and_then(|map| map.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            ErrorData::invalid_params(
                format!("prompt '{prompt}' needs the string argument '{key}'"),
                None,
            )
        })
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn user_text(text: impl Into<String>) -> Value {
    user(json!({"type": "text", "text": text.into()}))
}

pub fn get_prompt(
    name: &str,
    arguments: Option<&serde_json::Map<String, Value>>,
) -> Result<GetPromptResult, ErrorData> {
    let messages = match name {
        "test_simple_prompt" => vec![user_text("This is a simple prompt for testing.")],
        "test_prompt_with_arguments" => {
            let arg1 = argument(arguments, name, "arg1")?;
            let arg2 = argument(arguments, name, "arg2")?;
            vec![user_text(format!(
                "Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
            ))]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = argument(arguments, name, "resourceUri")?;
            vec![
                user(json!({"type": "resource", "resource": {
                    "uri": uri,
                    "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."
                }})),
                user_text("Please process the embedded resource above."),
            ]
        }
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"})),
            user_text("Please analyze the image above."),
        ],
        _ => return Err(not_found("Prompt", name)),
    };
    wire(json!({"messages": messages}))
}

/// Candidate values per completable argument: the prompt arguments of
/// `test_prompt_with_arguments` and the `{id}` of the template. Others complete to nothing.
fn candidates(reference: &Value, argument: &str) -> &'static [&'static str] {
    let kind = reference.get("type").and_then(Value::as_str);
    let prompt = reference.get("name").and_then(Value::as_str);
    let uri = reference.get("uri").and_then(Value::as_str);
    match (kind, prompt, uri, argument) {
        (Some("ref/prompt"), Some("test_prompt_with_arguments"), _, "arg1" | "arg2") => {
            &["paris", "park", "party", "test", "testing"]
        }
        (Some("ref/resource"), _, Some(TEMPLATE), "id") => &["1", "12", "123", "42"],
        _ => &[],
    }
}

/// The candidates that start with the typed prefix, in order.
pub fn complete(request: &CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
    let wire_request = json!(request);
    let argument = &wire_request["argument"];
    let name = argument["name"].as_str().unwrap_or_default();
    let prefix = argument["value"].as_str().unwrap_or_default();
    let values: Vec<&str> = candidates(&wire_request["ref"], name)
        .iter()
        .copied()
        .filter(|value| value.starts_with(prefix))
        .collect();
    wire(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves the template substitutes a plain `{id}` and refuses empty, nested or unknown URIs
    /// with -32602.
    #[test]
    fn template_ids_are_bounded() {
        assert_eq!(template_id("test://template/123/data"), Some("123"));
        assert_eq!(template_id("test://template//data"), None);
        assert_eq!(template_id("test://template/a/b/data"), None);
        assert!(read("test://template/123/data").is_ok());
        assert_eq!(read("test://nope").err().map(|e| e.code.0), Some(-32602));
    }

    /// Proves every listing and every prompt converts to rmcp's types (the wire JSON is valid),
    /// and that a prompt missing a required argument is an error.
    #[test]
    fn every_listing_and_prompt_builds() {
        assert_eq!(resources().expect("resources").resources.len(), 3);
        assert_eq!(templates().expect("templates").resource_templates.len(), 1);
        let prompts = prompts().expect("prompts").prompts;
        assert_eq!(prompts.len(), 4);
        let args = json!({"arg1": "a", "arg2": "b", "resourceUri": "test://x"});
        for prompt in prompts {
            assert!(
                get_prompt(&prompt.name, args.as_object()).is_ok(),
                "{}",
                prompt.name
            );
        }
        assert!(get_prompt("test_prompt_with_arguments", None).is_err());
    }
}
