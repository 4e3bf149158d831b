//! `narrowgate init`'s `content:` for a tool: the kinds of block it returns besides text, so that
//! accepting `init` unchanged passes an image tool's images (the default is text only). MCP has
//! no field for them: they are read from its `outputSchema` (a `type` that may be `image`,
//! `audio` or `resource`, as server-filesystem's `read_media_file` declares) and from its name,
//! texts and argument names, and marked GUESSED.

use std::collections::BTreeSet;

use rmcp::model::Tool;
use serde_json::Value;

use crate::contract::{ToolContract, content};

/// The kinds of block beside text, in the order they are written.
const KINDS: [&str; 3] = ["image", "audio", "resource"];

/// Words that say a tool returns a kind (matched on lower-cased words of its texts).
fn kind_of_word(word: &str) -> Option<&'static str> {
    match word {
        "image" | "images" | "png" | "jpeg" | "jpg" | "picture" | "screenshot" | "photo"
        | "includeimage" => Some("image"),
        "audio" | "sound" | "wav" | "mp3" | "voice" => Some("audio"),
        "resource" | "resources" | "blob" => Some("resource"),
        _ => None,
    }
}

/// `check`'s warning for a contract that passes text only (no `content:`) while its upstream
/// tool seems to return other blocks, which the gateway then withholds.
pub fn withheld_warning(name: &str, contract: &ToolContract, tool: &Tool) -> Option<String> {
    if contract.content != content::default_rules() {
        return None;
    }
    let lines = render(tool);
    let kinds: Vec<&str> = KINDS
        .into_iter()
        .filter(|k| lines.contains(&format!("{{ type: {k} }}")))
        .collect();
    (!kinds.is_empty()).then(|| {
        format!(
            "tool `{name}` ({}): upstream tool `{}` seems to return {} blocks, which a contract \
             without `content:` withholds (text only); list the kinds its results may carry, \
             e.g. `content: [{{type: text}}, {{type: {}}}]`",
            contract.file.display(),
            tool.name,
            kinds.join(", "),
            kinds[0]
        )
    })
}

/// The `content:` lines of `tool` (six-space items), or nothing when it seems to return text
/// only (the default).
pub fn render(tool: &Tool) -> String {
    let mut declared = BTreeSet::new();
    if let Some(output) = &tool.output_schema {
        declared_kinds(&Value::Object(output.as_ref().clone()), &mut declared);
    }
    let mut named = BTreeSet::new();
    let mut texts = vec![tool.name.to_string()];
    texts.extend(tool.title.iter().map(ToString::to_string));
    texts.extend(tool.description.iter().map(ToString::to_string));
    if let Some(Value::Object(properties)) = tool.input_schema.get("properties") {
        texts.extend(properties.keys().cloned());
    }
    for text in &texts {
        let lower = text.to_lowercase();
        for word in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
            if let Some(kind) = kind_of_word(word) {
                named.insert(kind);
            }
        }
    }
    if declared.is_empty() && named.is_empty() {
        return String::new();
    }
    let from = match (declared.is_empty(), named.is_empty()) {
        (false, true) => "its outputSchema",
        (true, false) => "its name and texts",
        _ => "its outputSchema, name and texts",
    };
    let mut out = format!(
        "    content:   # GUESSED from {from}: the blocks passed as sent; narrow `mime_types` and set `max_bytes`\n      - {{ type: text }}\n"
    );
    for kind in KINDS {
        if declared.contains(kind) || named.contains(kind) {
            out.push_str(&format!("      - {{ type: {kind} }}\n"));
        }
    }
    out
}

/// The `ui:` line of a tool that carries an MCP Apps UI (`_meta.ui.resourceUri`, or the older
/// `_meta["ui/resourceUri"]`), with its `visibility` when it says one; nothing otherwise. The
/// resource itself is scaffolded with the upstream's other resources.
pub fn render_ui(tool: &Tool, quote: impl Fn(&str) -> String) -> String {
    let Some(meta) = &tool.meta else {
        return String::new();
    };
    let ui = meta.get("ui");
    let Some(uri) = ui
        .and_then(|u| u.get("resourceUri"))
        .or_else(|| meta.get("ui/resourceUri"))
        .and_then(Value::as_str)
        .filter(|u| u.starts_with("ui://") && u.len() > "ui://".len())
    else {
        return String::new();
    };
    let visibility: Vec<&str> = ui
        .and_then(|u| u.get("visibility"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|v| matches!(*v, "model" | "app"))
        .collect();
    let visibility = match visibility.is_empty() {
        true => String::new(),
        false => format!(", visibility: [{}]", visibility.join(", ")),
    };
    format!(
        "    ui: {{ resource: {}{visibility} }}   # MCP Apps: published while `resources` declares it\n",
        quote(uri)
    )
}

/// The kinds a schema's `type` properties may be (`enum`/`const` of a property named `type`).
fn declared_kinds(schema: &Value, kinds: &mut BTreeSet<&'static str>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get("properties")
                && let Some(Value::Object(ty)) = properties.get("type")
            {
                let values = ty
                    .get("enum")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .chain(ty.get("const"));
                for value in values {
                    if let Some(kind) = KINDS.iter().find(|k| value.as_str() == Some(k)) {
                        kinds.insert(kind);
                    }
                }
            }
            map.values().for_each(|v| declared_kinds(v, kinds));
        }
        Value::Array(items) => items.iter().for_each(|v| declared_kinds(v, kinds)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str, description: &str, output: Option<Value>) -> Tool {
        let object = |v: Value| Arc::new(v.as_object().cloned().unwrap_or_default());
        let mut tool = Tool::new(
            name.to_string(),
            description.to_string(),
            object(json!({"type": "object"})),
        );
        if let Some(output) = output {
            tool = tool.with_raw_output_schema(object(output));
        }
        tool
    }

    /// Proves: the kinds come from an outputSchema's `type` enums (server-filesystem's
    /// read_media_file) or from the tool's words (server-everything's get-tiny-image), and a
    /// text tool gets no `content:` (the default, text only).
    #[test]
    fn kinds_come_from_the_output_schema_and_the_texts() {
        let media = tool(
            "read_media_file",
            "Read a file.",
            Some(
                json!({"type": "object", "properties": {"content": {"type": "array", "items": {"anyOf": [
                    {"type": "object", "properties": {"type": {"type": "string", "enum": ["image", "audio"]}}},
                    {"type": "object", "properties": {"type": {"const": "resource"}}}
                ]}}}}),
            ),
        );
        let text = render(&media);
        assert!(text.contains("GUESSED from its outputSchema:"), "{text}");
        for kind in ["text", "image", "audio", "resource"] {
            assert!(text.contains(&format!("{{ type: {kind} }}")), "{text}");
        }
        let tiny = render(&tool(
            "get-tiny-image",
            "Returns a tiny MCP logo image.",
            None,
        ));
        assert!(
            tiny.contains("{ type: image }") && !tiny.contains("audio"),
            "{tiny}"
        );
        assert_eq!(render(&tool("get_time", "The current time.", None)), "");
    }

    /// Proves: `check` warns of a text-only contract for a tool that returns images, and not
    /// once the contract lists them (or for a text tool).
    #[test]
    fn check_warns_of_withheld_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("c.yaml"),
            "upstream: u\ntools:\n  plain: {}\n  listed:\n    content: [{type: text}, {type: image}]\n",
        )
        .expect("write");
        let set = crate::contract::ContractSet::load_dir(dir.path()).expect("loads");
        let image = tool("get-tiny-image", "Returns a tiny MCP logo image.", None);
        let warned = withheld_warning("plain", &set.tools["plain"], &image).expect("a warning");
        assert!(
            warned.contains("image") && warned.contains("withholds"),
            "{warned}"
        );
        assert!(withheld_warning("listed", &set.tools["listed"], &image).is_none());
        let text = tool("get_time", "The current time.", None);
        assert!(withheld_warning("plain", &set.tools["plain"], &text).is_none());
    }

    /// Proves: a tool's UI is scaffolded from `_meta.ui` (or the older flat key), with its
    /// visibility, and a tool without one gets no `ui:`.
    #[test]
    fn ui_comes_from_the_tools_meta() {
        let quote = |s: &str| format!("\"{s}\"");
        let with = |meta: Value| {
            let mut t = tool("get-time", "Time.", None);
            t.meta = serde_json::from_value(meta).ok();
            render_ui(&t, quote)
        };
        assert_eq!(
            with(
                json!({"ui": {"resourceUri": "ui://get-time/mcp-app.html"}, "ui/resourceUri": "ui://get-time/mcp-app.html"})
            ),
            "    ui: { resource: \"ui://get-time/mcp-app.html\" }   # MCP Apps: published while `resources` declares it\n"
        );
        assert!(with(json!({"ui/resourceUri": "ui://a"})).contains("\"ui://a\""));
        assert!(
            with(json!({"ui": {"resourceUri": "ui://a", "visibility": ["app"]}}))
                .contains("visibility: [app]")
        );
        assert_eq!(with(json!({"ui": {"resourceUri": "https://x"}})), "");
        assert_eq!(render_ui(&tool("t", "x", None), quote), "");
    }
}
