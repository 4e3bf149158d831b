//! A tool's `ui:` (MCP Apps, the `io.modelcontextprotocol/ui` extension; docs/contracts.md): the
//! `ui://` resource a host renders for the tool, and who may see the tool (the model, the app).
//! Published as the tool's `_meta.ui` only when the contract itself declares that resource and
//! the caller may read it: an upstream's own `_meta` never is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The extension's identifier, as clients declare it in their capabilities' `extensions`.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The `_meta` key MCP Apps hosts before the `ui` object read (the ext-apps SDK still writes
/// both); published alongside it for them.
const LEGACY_RESOURCE_URI_KEY: &str = "ui/resourceUri";

/// Who sees a tool with a UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// The model may see and call it (in `tools/list`).
    Model,
    /// The app (the rendered UI) may call it through its host.
    App,
}

/// `ui:` as written.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "MCP Apps UI")]
pub struct UiFields {
    /// The `ui://` resource the host renders for this tool; it must also be declared in this
    /// file's `resources`, or it is not published.
    resource: String,
    /// Who sees the tool: `model` (listed to every client) and/or `app` (only its UI calls it).
    /// `[app]` lists the tool only to clients that declared the UI extension, and only they may
    /// call it. Default `[model, app]`.
    visibility: Option<Vec<Visibility>>,
}

/// A checked `ui:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ui {
    pub resource: String,
    /// As written (`None`: the default, `[model, app]`, which is not published).
    pub visibility: Option<Vec<Visibility>>,
}

impl Ui {
    /// Checks the written fields. Errors carry a key suffix and a message.
    pub fn build(f: UiFields) -> Result<Ui, (String, String)> {
        let Some(rest) = f.resource.strip_prefix("ui://") else {
            return Err((
                ".ui.resource".into(),
                format!("`{}` must be a ui:// URI (MCP Apps)", f.resource),
            ));
        };
        if rest.is_empty()
            || f.resource
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err((
                ".ui.resource".into(),
                format!("`{}` is not a ui:// URI", f.resource.escape_debug()),
            ));
        }
        if let Some(v) = &f.visibility
            && v.is_empty()
        {
            return Err((
                ".ui.visibility".into(),
                "must name `model`, `app` or both; a tool seen by neither is no tool".into(),
            ));
        }
        Ok(Ui {
            resource: f.resource,
            visibility: f.visibility,
        })
    }

    /// Whether only the app may see and call the tool (`visibility: [app]`).
    pub fn app_only(&self) -> bool {
        self.visibility
            .as_ref()
            .is_some_and(|v| !v.contains(&Visibility::Model))
    }

    /// The tool's `_meta` as published: `ui` with the resource (and the visibility, when
    /// written), and the older flat key.
    pub fn meta(&self) -> serde_json::Map<String, Value> {
        let mut ui = json!({"resourceUri": self.resource});
        if let Some(v) = &self.visibility {
            ui["visibility"] = json!(v);
        }
        let mut meta = serde_json::Map::new();
        meta.insert("ui".into(), ui);
        meta.insert(LEGACY_RESOURCE_URI_KEY.into(), json!(self.resource));
        meta
    }
}

/// Whether client capabilities (as JSON: an `initialize`'s, or a 2026-07-28 request's
/// `io.modelcontextprotocol/clientCapabilities`) declare the UI extension.
pub fn declares_ui(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(UI_EXTENSION))
        .is_some_and(|v| !v.is_null())
}

/// Whether the client behind a request declared the UI extension: in its `initialize`
/// (`initialized`, a session's) or in the request's own `_meta` (a 2026-07-28 stateless one).
pub fn client_declares_ui(
    initialized: Option<&rmcp::model::ClientCapabilities>,
    meta: &rmcp::model::RequestMetaObject,
) -> bool {
    initialized
        .and_then(|c| c.extensions.as_ref())
        .is_some_and(|e| e.contains_key(UI_EXTENSION))
        || declares_ui(meta.get("io.modelcontextprotocol/clientCapabilities"))
}

/// What the rest of the gateway asks of the contracts about MCP Apps.
impl super::ContractSet {
    /// The tool's `_meta` for `may_read`'s caller: its `ui:` when the same contract file
    /// declares that resource and the caller may read it, else none (no upstream `_meta` is
    /// ever published).
    pub fn ui_meta(
        &self,
        tool: &super::ToolContract,
        may_read: impl Fn(&str) -> bool,
    ) -> Option<serde_json::Map<String, serde_json::Value>> {
        let ui = tool.ui.as_ref()?;
        self.resource_for(&ui.resource)
            .filter(|r| r.upstream == tool.upstream && r.file == tool.file)
            .filter(|_| may_read(&ui.resource))
            .map(|_| ui.meta())
    }

    /// `check`'s warnings about `ui:`: a UI whose resource the same file does not declare is
    /// never published.
    pub fn ui_warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for (name, tool) in &self.tools {
            let Some(ui) = &tool.ui else { continue };
            let declared = self
                .resource_for(&ui.resource)
                .is_some_and(|r| r.upstream == tool.upstream && r.file == tool.file);
            if !declared {
                warnings.push(format!(
                    "tool `{name}` ({}) has `ui.resource: {}` but that file's `resources` does not \
                     declare it: its UI link is never published (add `- uri: \"{}\"` to `resources`)",
                    tool.file.display(),
                    ui.resource,
                    ui.resource
                ));
            }
        }
        warnings
    }

    /// The client extensions some contract of `upstream` uses: declared to that upstream, so
    /// that a server that offers a UI only to hosts that can show one does.
    pub fn used_extensions(&self, upstream: &str) -> Vec<String> {
        let uses_ui = self
            .tools
            .values()
            .any(|t| t.upstream == upstream && t.ui.is_some());
        match uses_ui {
            true => vec![UI_EXTENSION.to_string()],
            false => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ui(v: Value) -> Result<Ui, (String, String)> {
        Ui::build(serde_json::from_value(v).expect("fields"))
    }

    /// Proves: only ui:// resources and a non-empty visibility load; `[app]` is app-only; the
    /// published `_meta` carries the contract's resource (and visibility only when written).
    #[test]
    fn ui_loads_checked_and_publishes_only_the_contracts_words() {
        assert_eq!(
            ui(json!({"resource": "https://x/app.html"})).unwrap_err().0,
            ".ui.resource"
        );
        assert_eq!(
            ui(json!({"resource": "ui://"})).unwrap_err().0,
            ".ui.resource"
        );
        assert_eq!(
            ui(json!({"resource": "ui://a", "visibility": []}))
                .unwrap_err()
                .0,
            ".ui.visibility"
        );
        let both = ui(json!({"resource": "ui://t/app.html"})).expect("loads");
        assert!(!both.app_only());
        assert_eq!(
            Value::Object(both.meta()),
            json!({"ui": {"resourceUri": "ui://t/app.html"}, "ui/resourceUri": "ui://t/app.html"})
        );
        let app = ui(json!({"resource": "ui://t/app.html", "visibility": ["app"]})).expect("loads");
        assert!(app.app_only());
        assert_eq!(app.meta()["ui"]["visibility"], json!(["app"]));
    }

    /// Proves: a tool's `_meta.ui` is published only when its own file declares the resource
    /// and the caller may read it; `check` warns of an undeclared one; the UI extension is
    /// declared to the upstream whose contracts use it, and to no other.
    #[test]
    fn the_ui_is_published_only_with_its_resource_declared_and_readable() {
        use crate::contract::ContractSet;
        let dir = tempfile::tempdir().expect("tempdir");
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(name), text).expect("write");
        };
        write(
            "a.yaml",
            "upstream: apps\ntools:\n  shown:\n    ui: {resource: \"ui://a/app.html\"}\n  \
             hidden:\n    ui: {resource: \"ui://b/app.html\", visibility: [app]}\n\
             resources:\n  - uri: \"ui://a/app.html\"\n",
        );
        write(
            "b.yaml",
            "upstream: apps\ntools:\n  elsewhere:\n    ui: {resource: \"ui://a/app.html\"}\n\
             resources:\n  - uri: \"ui://b/app.html\"\n",
        );
        write("c.yaml", "upstream: other\ntools:\n  plain: {}\n");
        let set = ContractSet::load_dir(dir.path()).expect("loads");
        let tool = |n: &str| set.tools.get(n).expect("tool").clone();
        assert!(set.ui_meta(&tool("shown"), |_| true).is_some());
        assert!(set.ui_meta(&tool("shown"), |_| false).is_none());
        // Declared, but in another file (of the same upstream): not vouched for here.
        assert!(set.ui_meta(&tool("elsewhere"), |_| true).is_none());
        assert!(set.ui_meta(&tool("hidden"), |_| true).is_none());
        assert!(set.ui_meta(&tool("plain"), |_| true).is_none());
        let warnings = set.ui_warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings.iter().all(|w| w.contains("never published")),
            "{warnings:?}"
        );
        assert!(set.any_app_only);
        assert_eq!(set.used_extensions("apps"), vec![UI_EXTENSION.to_string()]);
        assert!(set.used_extensions("other").is_empty());
    }

    /// Proves: the extension counts only when declared under `extensions`.
    #[test]
    fn the_ui_extension_is_read_from_extensions() {
        assert!(declares_ui(Some(
            &json!({"extensions": {UI_EXTENSION: {"mimeTypes": ["text/html;profile=mcp-app"]}}})
        )));
        assert!(declares_ui(Some(
            &json!({"extensions": {UI_EXTENSION: {}}})
        )));
        assert!(!declares_ui(Some(&json!({"extensions": {"other": {}}}))));
        assert!(!declares_ui(Some(&json!({UI_EXTENSION: {}}))));
        assert!(!declares_ui(None));
    }
}
