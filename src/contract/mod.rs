//! Contracts (docs/contracts.md): what an operator declares about each tool it exposes, loaded from the
//! contracts directory, checked, and compiled once into validators.
//!
//! A contract is the only source of what clients see: its name, texts, schemas and annotations are
//! published; the upstream's never are.

mod build;
pub mod content;
mod declared;
pub mod digest;
pub mod enforce;
pub mod errors;
pub mod fixed;
pub mod keywords;
pub mod narrow;
pub mod publish;
pub mod relay_policy;
pub mod resources;
pub mod schema;
pub mod ui;
pub mod when;
mod written_for;

pub use declared::{Approval, DEFAULT_APPROVAL_TIMEOUT, Privilege, SideEffects};
pub use written_for::WrittenFor;

#[cfg(test)]
mod proptests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jsonschema::Validator;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::config::schema::or_env_reference;
use crate::config::{ConfigDuration, LoadError, Rate, valid_upstream_name, yaml};

/// One contract file: the tools of one upstream. Public for `narrowgate schema contract` and the
/// test that reads the example files; the field docs are the descriptions editors show.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    description = "A narrowgate contract file: the tools of one upstream that clients may use, and \
    what the gateway enforces for each. A tool without a contract does not exist for clients; \
    everything they see of it comes from its contract. Unknown keys are errors. `${VAR}` in any \
    string is read from the environment (`$$` stands for `$`). See docs/contracts.md."
)]
pub struct ContractFile {
    /// The upstream these tools belong to: a key of `upstreams` in the configuration.
    #[schemars(pattern(or_env_reference("[a-z0-9_-]{1,32}")))]
    upstream: String,
    /// The tools exposed to clients, by exposed name (`^[A-Za-z0-9_-]{1,64}$`, unique across all
    /// contract files).
    #[serde(default)]
    #[schemars(extend("propertyNames" = {"pattern": "^[A-Za-z0-9_-]{1,64}$"}))]
    tools: BTreeMap<String, ToolContractFields>,
    /// The upstream's resources clients may list and read, under the upstream's own URIs: exact
    /// URIs, globs over them, or URI templates. A URI no entry matches does not exist for
    /// clients.
    #[serde(default)]
    resources: Vec<resources::ResourceFields>,
    /// The upstream's prompts clients may list and get, by exposed name (unique across all
    /// contract files).
    #[serde(default)]
    #[schemars(extend("propertyNames" = {"pattern": "^[A-Za-z0-9_-]{1,64}$"}))]
    prompts: BTreeMap<String, resources::PromptFields>,
    /// The published server this file was written and reviewed against (the contract library
    /// records it): `narrowgate check` says when the running server reports another.
    written_for: Option<WrittenFor>,
}

/// A tool's contract as written in the file.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Tool contract")]
struct ToolContractFields {
    /// The upstream's name for the tool; the exposed name (the key under `tools`) by default.
    upstream_tool: Option<String>,
    /// The title clients see; the upstream's is never published.
    title: Option<String>,
    /// The description clients (and models) see; the upstream's is never published.
    description: Option<String>,
    /// What the tool does to the world: `read` (published as `readOnlyHint`), `write` or
    /// `execute`.
    #[serde(default)]
    privilege: Privilege,
    /// Whether its effects can be undone: `none`, `reversible` or `irreversible` (published as
    /// `destructiveHint`). Default: `none` for `read`, `irreversible` otherwise.
    side_effects: Option<SideEffects>,
    /// Whether calling it twice has the effect of calling it once (published as
    /// `idempotentHint`). Default: true for `read`, false otherwise.
    idempotent: Option<bool>,
    /// The per-call timeout; the upstream's `timeout` by default, else 30s.
    timeout: Option<ConfigDuration>,
    /// How often a call that failed transiently (timeout, connection lost) is retried, with
    /// backoff. More than 0 only for idempotent tools: a retried write could take effect twice.
    #[serde(default)]
    retries: u32,
    /// The OAuth scopes a caller must hold to call it (a token lacking one gets 403
    /// `insufficient_scope`).
    #[serde(default)]
    scopes: Vec<String>,
    /// A rate limit over all calls of this tool, per caller.
    rate: Option<Rate>,
    /// A window (`60s`) in which an identical call (same caller, tool and arguments) replays the
    /// recorded answer instead of running again.
    dedupe: Option<ConfigDuration>,
    /// The JSON Schema (2020-12) of the arguments, published as the tool's `inputSchema`; it must
    /// be `type: object`. Without it the tool takes no arguments.
    #[serde(default)]
    #[schemars(schema_with = "schema::input_schema")]
    input: Option<Value>,
    /// The JSON Schema (2020-12) every result's `structuredContent` must satisfy; without it
    /// results are not validated.
    #[serde(default)]
    #[schemars(schema_with = "schema::output_schema")]
    output: Option<Value>,
    /// The content blocks a result may carry to the client as the upstream sent them, each by
    /// `type` (`text`, `image`, `audio`, `resource`), with optional `mime_types` and
    /// `max_bytes`. Default: text only. With `output`, a text block must also repeat the
    /// validated `structuredContent` (its JSON, or one of its string values); any block not
    /// passed is replaced by the JSON of `structuredContent`. Without `output`, it is dropped.
    #[serde(default)]
    content: Vec<content::ContentFields>,
    /// An MCP Apps UI for the tool: `{resource: "ui://…", visibility: [model, app]}`. Published
    /// as the tool's `_meta.ui` only when the resource is declared in this file's `resources`
    /// and the caller may read it; `visibility: [app]` lists the tool only to clients that
    /// declared the `io.modelcontextprotocol/ui` extension, and only they may call it.
    ui: Option<ui::UiFields>,
    /// Arguments the gateway sets on every call, by name: a JSON constant, or a string with
    /// `${caller.name}`, `${caller.roles}` or `${caller.claims.NAME}` (set per call; `${VAR}`
    /// is the environment, as everywhere). They are removed from the published `inputSchema`
    /// and a call that sends one is refused; the upstream receives them. Declare one under
    /// `input.properties` only to constrain its resolved value.
    #[serde(default)]
    fixed: BTreeMap<String, Value>,
    /// JSON pointers (`/token`) to arguments whose values are replaced by a marker in receipts.
    #[serde(default)]
    #[schemars(inner(pattern(or_env_reference("/.*"))))]
    redact: Vec<String>,
    /// The digest of the upstream's tool definition this contract was reviewed against
    /// (`sha256:` and 64 hex digits, as `narrowgate check` and `init` print it). If the upstream's
    /// definition changes, the tool is disabled until the pin is updated.
    #[schemars(pattern(or_env_reference("sha256:[0-9A-Fa-f]{64}")))]
    pin: Option<String>,
    /// Preconditions (CEL) that must all hold for a call to go ahead, checked after the
    /// arguments validate and before rate limits. A false one denies the call with its
    /// `message`; one that cannot be evaluated denies it too.
    #[serde(default)]
    when: Vec<when::WhenFields>,
    /// Which requests the upstream may send to the calling client while the tool runs
    /// (`sampling`, `elicitation`, `roots`; each `true` by default). A refused one gets a
    /// JSON-RPC error upstream, never an answer.
    relay: Option<relay_policy::RelayPolicy>,
    /// Who must approve each call before it is forwarded: `none` (the default), `user` (the
    /// calling client's user, asked through MCP elicitation) or `approver` (a caller or role
    /// listed in the configuration's `approvers`, through `narrowgate approvals` or
    /// `/approvals`). A call that is not approved is never sent upstream.
    #[serde(default)]
    approval: Approval,
    /// How long a call waits for an approver's decision (`approval: approver`) before it is
    /// refused; an identical call sent again within it collects the decision. Default 5m.
    approval_timeout: Option<ConfigDuration>,
    /// Types for the upstream's tool errors, first match wins: `{not_found: {match: "(?i)no
    /// such|not found", retry: false}}`. A tool error of the upstream's answers with the type
    /// whose `match` (a regex) finds its text; unmatched ones are `upstream_error`.
    #[serde(default)]
    errors: errors::ErrorsFields,
    /// What answers instead of a failure of the listed types: `{types: [unavailable, timeout],
    /// fallback: OTHER_TOOL}` (read tools only; the same arguments, through the other tool's
    /// contract and the caller's allowlist) or `{types: […], degrade: "text shown instead"}`.
    on_error: Option<errors::OnErrorFields>,
    /// A window (`60s`) in which an identical call answers from the cache without reaching the
    /// upstream (read-only, idempotent tools only). The answer carries
    /// `_meta: {"narrowgate/cached": true}`.
    cache: Option<ConfigDuration>,
    /// Who shares a cached answer: `caller` (the default: only the caller who made the call) or
    /// `shared` (every caller allowed the tool).
    cache_scope: Option<errors::CacheScope>,
}

/// A checked, compiled tool contract.
pub struct ToolContract {
    /// The exposed name, unique across all contracts.
    pub name: String,
    pub upstream: String,
    pub upstream_tool: String,
    /// The file it was declared in.
    pub file: PathBuf,
    pub title: Option<String>,
    pub description: Option<String>,
    pub privilege: Privilege,
    pub side_effects: SideEffects,
    pub idempotent: bool,
    pub timeout: Option<Duration>,
    pub retries: u32,
    pub scopes: Vec<String>,
    pub rate: Option<Rate>,
    pub dedupe: Option<Duration>,
    /// The input schema a client may send (2020-12): as written, without the `fixed` arguments.
    pub input: Value,
    /// The arguments the gateway sets on every call.
    pub fixed: fixed::Fixed,
    /// The written input schema, to check the arguments with the fixed ones set, when `input`
    /// constrains some fixed argument (else `None`).
    pub fixed_validator: Option<Arc<Validator>>,
    pub output: Option<Value>,
    pub input_validator: Arc<Validator>,
    pub output_validator: Option<Arc<Validator>>,
    /// Which content blocks pass as sent (`content:`, or text only).
    pub content: Vec<content::ContentRule>,
    /// The MCP Apps UI (`ui:`).
    pub ui: Option<ui::Ui>,
    pub redact: Vec<String>,
    pub pin: Option<String>,
    /// Compiled `when` preconditions, in order (empty: none, and nothing to evaluate).
    pub when: Vec<when::Precondition>,
    /// Who approves each call before it is forwarded.
    pub approval: Approval,
    /// How long a call waits for an approver (`approval: approver`).
    pub approval_timeout: Duration,
    /// `sha256:` of the contract's canonical JSON, recorded with each call.
    pub digest: String,
    /// The requests from the upstream relayed to the client during a call.
    pub relay: relay_policy::RelayPolicy,
    /// Types for the upstream's tool errors (`errors:`), in order.
    pub errors: errors::ErrorRules,
    /// What answers instead of a failure (`on_error:`).
    pub on_error: Option<errors::OnError>,
    /// How long an identical call is answered from the cache (`cache:`).
    pub cache: Option<Duration>,
    pub cache_scope: errors::CacheScope,
}

impl std::fmt::Debug for ToolContract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContract")
            .field("name", &self.name)
            .field("upstream", &self.upstream)
            .field("upstream_tool", &self.upstream_tool)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// Every tool contract, by exposed name.
#[derive(Debug, Default)]
pub struct ContractSet {
    pub tools: BTreeMap<String, Arc<ToolContract>>,
    /// Every `resources:` entry, in file order.
    pub resources: Vec<Arc<resources::ResourceContract>>,
    /// Every prompt contract, by exposed name.
    pub prompts: BTreeMap<String, Arc<resources::PromptContract>>,
    /// By upstream, the server its contract file was written for (`written_for:`).
    pub written_for: BTreeMap<String, WrittenFor>,
    /// Whether some tool is for MCP Apps only (`ui.visibility: [app]`): then who may call it
    /// depends on the client's declared extensions, which only rmcp's path knows.
    pub any_app_only: bool,
}

/// `^[A-Za-z0-9_-]{1,64}$`: the tool names LLM provider APIs accept.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl ContractSet {
    /// Loads every `*.yaml`/`*.yml` file in `dir`, in name order.
    pub fn load_dir(dir: &Path) -> Result<ContractSet, LoadError> {
        let (set, mut errors) = ContractSet::load_dir_all(dir);
        match errors.is_empty() {
            true => Ok(set),
            false => Err(errors.swap_remove(0)),
        }
    }

    /// Like [`ContractSet::load_dir`], going on past each problem: what loaded, and every
    /// problem found (a file that cannot be read or parsed, each tool, resource or prompt that
    /// is invalid or clashes with one already loaded), so that `check` names them all at once.
    pub fn load_dir_all(dir: &Path) -> (ContractSet, Vec<LoadError>) {
        let mut set = ContractSet::default();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(source) => {
                let error = LoadError::Read {
                    path: dir.to_path_buf(),
                    source,
                };
                return (set, vec![error]);
            }
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
            })
            .collect();
        files.sort();
        let mut errors = Vec::new();
        for file in files {
            match yaml::load(&file) {
                Ok(parsed) => errors.extend(set.add_parsed(&file, parsed)),
                Err(e) => errors.push(e),
            }
        }
        errors.extend(set.check_fallbacks());
        (set, errors)
    }

    /// Each `on_error.fallback` names another read tool of the set; a tool whose fallback does
    /// not is refused (its file is named in the error), so a failure never falls back into
    /// nothing, a write, or itself.
    fn check_fallbacks(&mut self) -> Vec<LoadError> {
        let mut errors = Vec::new();
        let mut refused = Vec::new();
        for (name, contract) in &self.tools {
            let Some(errors::Recovery::Fallback(other)) =
                contract.on_error.as_ref().map(|o| &o.recovery)
            else {
                continue;
            };
            let problem = match self.tools.get(other) {
                _ if other == name => Some("a tool cannot be its own fallback".to_string()),
                None => Some(format!(
                    "the fallback `{other}` is not a tool of any contract file"
                )),
                Some(c) if c.privilege != Privilege::Read => Some(format!(
                    "the fallback `{other}` is not a read tool (`privilege: read`)"
                )),
                Some(_) => None,
            };
            if let Some(message) = problem {
                errors.push(LoadError::invalid(
                    &contract.file,
                    format!("tools.{name}.on_error.fallback"),
                    message,
                ));
                refused.push(name.clone());
            }
        }
        for name in refused {
            self.tools.remove(&name);
        }
        errors
    }

    /// Adds the contracts in `text`, as if read from `file` (which only names it in messages).
    /// Entry point for fuzz/.
    #[doc(hidden)]
    pub fn add_yaml(&mut self, file: &Path, text: &str) -> Result<(), LoadError> {
        match self
            .add_parsed(file, yaml::parse(file, text)?)
            .into_iter()
            .next()
        {
            Some(first) => Err(first),
            None => Ok(()),
        }
    }

    /// Adds every valid entry of `parsed`; returns the problems of the others.
    fn add_parsed(&mut self, file: &Path, parsed: ContractFile) -> Vec<LoadError> {
        if !valid_upstream_name(&parsed.upstream) {
            return vec![LoadError::invalid(
                file,
                "upstream",
                "an upstream name must match [a-z0-9_-]{1,32}",
            )];
        }
        let mut errors = Vec::new();
        if let Some(written_for) = parsed.written_for {
            match self.written_for.get(&parsed.upstream) {
                Some(other) if *other != written_for => errors.push(LoadError::invalid(
                    file,
                    "written_for",
                    format!(
                        "another file for upstream `{}` says it was written for {}; one upstream runs one server",
                        parsed.upstream, other.package
                    ),
                )),
                _ => {
                    self.written_for.insert(parsed.upstream.clone(), written_for);
                }
            }
        }
        for (name, fields) in parsed.tools {
            let key = format!("tools.{name}");
            if let Some(existing) = self.tools.get(&name) {
                errors.push(LoadError::invalid(
                    file,
                    key,
                    format!(
                        "tool name `{name}` is already declared in {}; exposed names must be unique (rename it, keeping `upstream_tool:`, or scaffold the file with `narrowgate init --prefix`)",
                        existing.file.display()
                    ),
                ));
                continue;
            }
            match build::build(file, &parsed.upstream, &name, fields) {
                Ok(contract) => {
                    self.any_app_only |= contract.ui.as_ref().is_some_and(ui::Ui::app_only);
                    self.tools.insert(name, Arc::new(contract));
                }
                Err((sub, message)) => {
                    errors.push(LoadError::invalid(file, format!("{key}{sub}"), message));
                }
            }
        }
        for (i, fields) in parsed.resources.into_iter().enumerate() {
            let entry = match resources::build_resource(file, &parsed.upstream, i, fields) {
                Ok(entry) => entry,
                Err((key, message)) => {
                    errors.push(LoadError::invalid(file, key, message));
                    continue;
                }
            };
            if let Some(existing) = resources::clash(&self.resources, &entry) {
                errors.push(LoadError::invalid(
                    file,
                    format!("resources.{i}"),
                    format!(
                        "`{}` is already declared in {} (`{}`); a URI belongs to one upstream",
                        entry.declared(),
                        existing.file.display(),
                        existing.declared()
                    ),
                ));
                continue;
            }
            self.resources.push(Arc::new(entry));
        }
        for (name, fields) in parsed.prompts {
            if let Some(existing) = self.prompts.get(&name) {
                errors.push(LoadError::invalid(
                    file,
                    format!("prompts.{name}"),
                    format!(
                        "prompt name `{name}` is already declared in {}; exposed names must be unique",
                        existing.file.display()
                    ),
                ));
                continue;
            }
            match resources::build_prompt(file, &parsed.upstream, &name, fields) {
                Ok(entry) => {
                    self.prompts.insert(name, Arc::new(entry));
                }
                Err((key, message)) => errors.push(LoadError::invalid(file, key, message)),
            }
        }
        errors
    }

    /// The resource entry a read of `uri` falls under: an exact URI first, else the first
    /// glob or template (in file order) that matches it.
    pub fn resource_for(&self, uri: &str) -> Option<&Arc<resources::ResourceContract>> {
        self.resources
            .iter()
            .find(|r| matches!(&r.matcher, resources::UriMatch::Exact(u) if u == uri))
            .or_else(|| self.resources.iter().find(|r| r.matches(uri)))
    }
}

#[cfg(test)]
mod tests;
