//! The gateway's configuration file (docs/configuration.md): where it listens, which upstreams it starts, who may
//! call it, and the blocks for OAuth, telemetry, receipts and shared state.
//!
//! Loading is strict on purpose: an unknown key is an error, because a misspelt policy key that was
//! silently ignored would weaken the policy without anyone noticing.

pub mod glob;
pub mod http_limits;
pub mod jwks;
pub mod needs;
pub mod schema;
pub mod units;
mod validate;
pub mod yaml;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use schema::or_env_reference;

pub use needs::Needs;
pub use units::{ByteSize, ConfigDuration, Rate};
pub use yaml::LoadError;

/// The smallest `error_text_bytes`: an error text shorter than this could not say what failed.
pub const MIN_ERROR_TEXT_BYTES: u64 = 64;

/// Where the configuration is read from when `--config` is not given.
pub const DEFAULT_CONFIG_PATH: &str = "config/narrowgate.yaml";

/// The whole configuration, with relative paths already resolved against the file's folder.
///
/// The field docs are the descriptions of `narrowgate schema config`, which editors show.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    description = "The narrowgate gateway's configuration file: where it listens, which MCP upstreams it \
    starts or connects to, who may call it, and the blocks for OAuth, telemetry, receipts and shared \
    state. Unknown keys are errors. Relative paths are relative to this file. `${VAR}` in any string \
    is read from the environment (`$$` stands for `$`). See docs/configuration.md."
)]
pub struct Config {
    /// The address to listen on, an IP address and port (`127.0.0.1:8080`, `0.0.0.0:8080`,
    /// `[::1]:8080`). The environment variable `NARROWGATE_LISTEN` overrides it.
    #[serde(default = "default_listen")]
    #[schemars(pattern(or_env_reference(
        r"(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|\[[^\]]+\]):[0-9]{1,5}"
    )))]
    pub listen: String,
    /// The URL path of the MCP endpoint (POST, GET, DELETE), starting with `/`.
    #[serde(default = "default_path")]
    #[schemars(pattern(or_env_reference("/.+")))]
    pub path: String,
    /// The gateway's public URL as clients reach it; the OAuth audience unless `oauth.audience`
    /// says otherwise.
    pub public_url: Option<String>,
    /// The `Host` header values admitted (a defence against DNS rebinding); other hosts get 403. An
    /// entry without a port matches any port; `*` admits every host. Behind a proxy or a Docker port
    /// mapping, add the name clients use.
    #[serde(default = "default_allowed_hosts")]
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin` values admitted, each with its scheme: exact (`https://app.example.com`) or
    /// any port (`http://localhost:*`). An `Origin` with the same host and port as the request's
    /// (allowed) `Host` is the gateway's own and always admitted. A request with any other
    /// `Origin` not listed gets 403; requests without one (non-browser clients) are unaffected.
    #[serde(default)]
    #[schemars(inner(pattern(or_env_reference(".*://.*"))))]
    pub allowed_origins: Vec<String>,
    /// The directory of contract files (`*.yaml`, `*.yml`), one file per upstream.
    #[serde(default = "default_contracts")]
    pub contracts: PathBuf,
    /// The largest request body admitted; larger ones get HTTP 413.
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: ByteSize,
    /// The largest upstream result passed on; a larger one becomes a tool error.
    #[serde(default = "default_max_result_bytes")]
    pub max_result_bytes: ByteSize,
    /// The most bytes of an upstream's error text (a tool error's text, a JSON-RPC error's
    /// message) that reach a client, control characters escaped: an error is the one thing an
    /// upstream returns that no contract describes, so it is kept short enough to read and too
    /// short to carry a payload. Between 64 bytes and `max_result_bytes`.
    #[serde(default = "default_error_text_bytes")]
    pub error_text_bytes: ByteSize,
    /// How long clients of protocol 2026-07-28 may keep a list (`tools/list`,
    /// `resources/list`, `prompts/list`) before asking again: its `ttlMs`. A change of the list
    /// ends it early (`notifications/*/list_changed`). Not set: `ttlMs: 0`, ask every time.
    pub list_ttl: Option<ConfigDuration>,
    /// The upstream MCP servers, by name (`[a-z0-9_-]{1,32}`, the name contract files refer to):
    /// each a stdio child (`command`) or a Streamable HTTP server (`url`).
    #[serde(default)]
    #[schemars(extend("propertyNames" = {"pattern": "^[a-z0-9_-]{1,32}$"}))]
    pub upstreams: BTreeMap<String, UpstreamConfig>,
    /// The callers known by API key, and the anonymous caller. With no caller and no `oauth`,
    /// every request gets 401.
    #[serde(default)]
    pub callers: Vec<CallerConfig>,
    /// Accept OAuth 2.1 bearer tokens (JWTs) as well as API keys.
    pub oauth: Option<OAuthConfig>,
    /// OpenTelemetry traces over OTLP, and Prometheus metrics at `/metrics`.
    pub telemetry: Option<TelemetryConfig>,
    /// Where the receipt of every `tools/call` is written; receipts are written even without
    /// this block.
    pub receipts: Option<ReceiptsConfig>,
    /// Where rate limits and dedupe windows live: `memory` (one instance) or `redis://host:6379`,
    /// shared by every replica that names the same Redis.
    #[serde(default = "default_state")]
    #[schemars(pattern(or_env_reference("memory|redis://.+")))]
    pub state: String,
    /// Whether the gateway answers plain `tools/call` requests on `path` itself (`true`) or
    /// leaves every request to the MCP SDK's Streamable HTTP service (`false`). The answers are
    /// the same (in a session JSON rather than a one-event SSE stream, which clients accept
    /// alike); answering itself skips the SDK's per-request tasks and channels, about a fifth of
    /// the gateway's CPU per call (BENCHMARKS.md). Turn it off to rule the gateway's own path out
    /// when a client misbehaves. Follows reloads.
    #[serde(default = "yes")]
    pub direct_calls: bool,
    /// The HTTP server's own limits: how long a client may take to send headers and bodies, and
    /// how many connections, MCP sessions and SSE streams may be open, per client and overall.
    /// Over a limit the answer is 408 or 503 with `Retry-After`. See docs/configuration.md.
    #[serde(default)]
    pub http: http_limits::HttpConfig,
    /// Who may decide the calls of tools with `approval: approver`: caller names (an API-key
    /// caller's `name`, or an OAuth token's `caller_claim`) and `role:NAME` for every caller
    /// holding that role (its `roles`, or its token's `roles_claim`). They list and decide
    /// pending calls through `narrowgate approvals` or `GET /approvals` and
    /// `POST /approvals/{id}`; nobody may decide their own call.
    #[serde(default)]
    pub approvers: Vec<String>,
    /// This replica's MCP endpoint as the other replicas reach it (`http://10.0.0.5:8080/mcp`),
    /// with `state: redis://…`: a 2026-07-28 client's answer to a question asked by this
    /// replica (a stateless call parked while the upstream asks the client something) that
    /// reaches another replica is passed on to this one. Defaults to `http://{listen}{path}`
    /// when `listen` names a concrete address, none for `0.0.0.0`/`[::]` (then such an answer
    /// is refused). The environment variable `NARROWGATE_REPLICA_URL` overrides it.
    #[serde(default)]
    #[schemars(pattern(or_env_reference("https?://.+")))]
    pub replica_url: Option<String>,
    /// `narrowgate stdio`: the caller the one client that launches the gateway acts as, when
    /// `NARROWGATE_API_KEY` is not set (with it, the caller whose key it is). The client is a
    /// program the local user started, so no key is presented: keep this file the user's own.
    pub stdio: Option<StdioConfig>,
    /// The file this was read from (not a key of the file).
    #[serde(skip)]
    pub source: PathBuf,
    /// `${VAR}`s left as written because the command it was loaded for does not use them
    /// ([`Config::load_for`]; never for `serve`).
    #[serde(skip)]
    pub unresolved: Vec<yaml::Unresolved>,
}

/// One upstream MCP server: a stdio child (`command`) or a Streamable HTTP server (`url`).
#[derive(Debug, Clone, Deserialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"title": "stdio upstream", "required": ["command"], "not": {"required": ["url"]}},
    {"title": "HTTP upstream", "required": ["url"], "not": {"required": ["command"]}},
]))]
pub struct UpstreamConfig {
    /// Start this program and speak MCP with it over stdio. A bare name (`npx`) is looked up on
    /// `PATH`; a relative path with a `/` is relative to the configuration file.
    pub command: Option<String>,
    /// The arguments of `command`.
    #[serde(default)]
    pub args: Vec<String>,
    /// The child's environment besides `PATH` and `HOME`: none of the gateway's own variables are
    /// passed on.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The child's working directory (default: the gateway's), relative to the configuration file.
    pub cwd: Option<PathBuf>,
    /// Connect to this Streamable HTTP MCP endpoint (`http://` or `https://`).
    #[schemars(pattern(or_env_reference("https?://.+")))]
    pub url: Option<String>,
    /// HTTP headers sent to this upstream only: the gateway's own credential for it, e.g.
    /// `Authorization: "Bearer ${TOKEN}"`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The default per-call timeout of this upstream's tools (a contract's `timeout` wins); 30s
    /// without it.
    pub timeout: Option<ConfigDuration>,
    /// `false`: this HTTP upstream's `tools/call`s go through rmcp's client, as every other
    /// message does, instead of the gateway's forwarder (the faster path, default `true`). The
    /// answers are the same either way (a test compares them); the switch is there to tell a
    /// forwarder fault from an upstream's, and is only valid with `url`.
    pub forwarder: Option<bool>,
}

/// How the gateway reaches an upstream, derived from [`UpstreamConfig`] once it is validated.
#[derive(Debug, Clone, PartialEq)]
pub enum UpstreamTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        /// `tools/call` through the forwarder (`upstream::forward`) rather than rmcp's client.
        forwarder: bool,
    },
}

impl UpstreamConfig {
    /// The transport this upstream uses. Only valid after [`Config::validate`].
    pub fn transport(&self) -> UpstreamTransport {
        match (&self.command, &self.url) {
            (Some(command), _) => UpstreamTransport::Stdio {
                command: command.clone(),
                args: self.args.clone(),
                env: self.env.clone(),
                cwd: self.cwd.clone(),
            },
            (None, url) => UpstreamTransport::Http {
                url: url.clone().unwrap_or_default(),
                headers: self.headers.clone(),
                forwarder: self.forwarder.unwrap_or(true),
            },
        }
    }
}

/// `stdio:`: who a stdio gateway's client is.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdioConfig {
    /// A caller's `name` from `callers`.
    #[schemars(length(min = 1))]
    pub caller: String,
}

/// A caller identified by an API key, or the anonymous caller.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"title": "API key by digest", "required": ["api_key_sha256"]},
    {"title": "API key from the environment", "required": ["api_key_env"]},
    {"title": "anonymous", "required": ["anonymous"], "properties": {"anonymous": {"const": true}}},
]))]
pub struct CallerConfig {
    /// The caller's name, unique: it names the caller in logs, rate limits and receipts.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The SHA-256 of the caller's API key, 64 hex digits (`narrowgate hash-key` prints it); the
    /// key itself is never stored.
    #[schemars(pattern(or_env_reference("[0-9A-Fa-f]{64}")))]
    pub api_key_sha256: Option<String>,
    /// The name of an environment variable holding the caller's API key; it must be set when the
    /// gateway starts.
    pub api_key_env: Option<String>,
    /// Requests without credentials are this caller (at most one caller). A request with a wrong
    /// key gets 401, never the anonymous caller.
    #[serde(default)]
    pub anonymous: bool,
    /// Globs over exposed tool names (`*` any run, `?` one character) this caller may use; none by
    /// default.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Globs over resource URIs (and URI templates, as declared) this caller may list, read,
    /// subscribe to and complete; none by default.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Globs over exposed prompt names this caller may list, get and complete; none by default.
    #[serde(default)]
    pub prompts: Vec<String>,
    /// A rate limit over all of this caller's calls.
    pub rate: Option<Rate>,
    /// The OAuth scopes this API-key caller holds, checked against the contracts' `scopes`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The roles this API-key caller holds, as contracts' `when` preconditions read them
    /// (`'finance' in caller.roles`). OAuth callers' roles come from `oauth.roles_claim`.
    #[serde(default)]
    pub roles: Vec<String>,
    /// How this caller finds its tools: `list` (every tool in `tools/list`, the default) or
    /// `search` (the meta-tools `search_tools` and `call_tool`, plus the tools of `always`).
    #[serde(default)]
    pub discovery: Discovery,
    /// With `discovery: search`: globs over tool names listed all the same (a few the model
    /// needs every time).
    #[serde(default)]
    pub always: Vec<String>,
}

/// How a caller finds its tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Discovery {
    /// `tools/list` lists every tool the caller may call.
    #[default]
    List,
    /// `tools/list` lists `search_tools`, `call_tool` and the `always` tools; the rest are
    /// found by searching.
    Search,
}

/// The gateway as an OAuth 2.1 resource server: JWT bearer tokens of one issuer.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"required": ["jwks_url"], "not": {"required": ["jwks_file"]}},
    {"required": ["jwks_file"], "not": {"required": ["jwks_url"]}},
]))]
pub struct OAuthConfig {
    /// The issuer tokens must name in `iss`.
    #[schemars(length(min = 1))]
    pub issuer: String,
    /// The audience tokens must name in `aud`; `public_url` by default (one of the two is
    /// required).
    pub audience: Option<String>,
    /// Where the issuer's signing keys (a JWK set) are fetched: `https://`, or `http://` to a
    /// loopback address. Set this or `jwks_file`.
    #[schemars(pattern(or_env_reference("https?://.+")))]
    pub jwks_url: Option<String>,
    /// A file holding the issuer's signing keys (a JWK set), relative to the configuration file.
    /// Set this or `jwks_url`.
    pub jwks_file: Option<PathBuf>,
    /// The authorization servers published in the protected-resource metadata
    /// (`/.well-known/oauth-protected-resource`).
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// The token claim that names the caller.
    #[serde(default = "default_caller_claim")]
    #[schemars(length(min = 1))]
    pub caller_claim: String,
    /// The token claim holding the caller's roles (a string or a list of strings).
    pub roles_claim: Option<String>,
    /// What each role may use, by role name; the role `default` applies to every valid token.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleConfig>,
}

/// What the holders of one OAuth role may use.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// Globs over exposed tool names (`*` any run, `?` one character); a token's tools are the
    /// union of its roles'.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Globs over resource URIs (and URI templates, as declared); a token's are the union of its
    /// roles'.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Globs over exposed prompt names; a token's are the union of its roles'.
    #[serde(default)]
    pub prompts: Vec<String>,
    /// A rate limit over all of a token's calls; a token with several roles gets the most generous.
    pub rate: Option<Rate>,
    /// How holders of this role find their tools (as a caller's `discovery`): a token with any
    /// role of `discovery: search` searches.
    #[serde(default)]
    pub discovery: Discovery,
    /// With `discovery: search`: globs over tool names listed all the same; a token's are the
    /// union of its roles'.
    #[serde(default)]
    pub always: Vec<String>,
}

/// OpenTelemetry traces and Prometheus metrics. Read at start: a reload does not change them.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OpenTelemetry `service.name` of the gateway's spans.
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// Where spans are exported over OTLP (`http://collector:4317`); `none` turns export off.
    /// Without it, `OTEL_EXPORTER_OTLP_ENDPOINT` is used; without either, nothing is exported.
    pub otlp_endpoint: Option<String>,
    /// The OTLP transport: `grpc` or `http/protobuf`.
    #[serde(default)]
    pub otlp_protocol: OtlpProtocol,
    /// Serve Prometheus metrics at `/metrics` (otherwise it answers 404).
    #[serde(default)]
    pub metrics: bool,
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
pub enum OtlpProtocol {
    #[default]
    #[serde(rename = "grpc")]
    Grpc,
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

/// The receipts database: one durable record per `tools/call`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptsConfig {
    /// The SQLite database file, relative to the configuration file (default
    /// `data/receipts.db`). Set either `path` or `url`, not both.
    pub path: Option<PathBuf>,
    /// A PostgreSQL database shared by the replicas, as `postgres://user:password@host:port/db`
    /// (or `postgresql://…`; `?host=/run/postgresql` for a unix socket). The gateway creates and
    /// migrates its tables there (`receipts`, `narrowgate_schema_version`). Write the password as
    /// `${VAR}` to keep it out of the file. Set either `path` or `url`, not both.
    pub url: Option<String>,
    /// Keep the arguments of each call (after removing the contract's `redact` pointers) besides
    /// their SHA-256.
    #[serde(default)]
    pub store_arguments: bool,
    /// How long receipts are kept (`30d`); without it they are kept for ever.
    pub retention: Option<ConfigDuration>,
    /// Flush every batch of receipts to stable storage before answering (survives power loss,
    /// costs one disk flush per batch). Without it a receipt is in the file before the answer,
    /// which survives any crash of the gateway but not of the machine.
    #[serde(default)]
    pub fsync: bool,
}

/// Where limiter and dedupe state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateBackend {
    Memory,
    Redis(String),
}

fn default_listen() -> String {
    "127.0.0.1:8080".into()
}
fn default_path() -> String {
    "/mcp".into()
}
fn default_allowed_hosts() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into(), "::1".into()]
}
fn default_contracts() -> PathBuf {
    PathBuf::from("contracts")
}
fn default_max_request_bytes() -> ByteSize {
    ByteSize(1 << 20)
}
fn default_max_result_bytes() -> ByteSize {
    ByteSize(4 << 20)
}
fn yes() -> bool {
    true
}
fn default_error_text_bytes() -> ByteSize {
    ByteSize(1 << 10)
}
fn default_state() -> String {
    "memory".into()
}
fn default_caller_claim() -> String {
    "sub".into()
}
fn default_service_name() -> String {
    "narrowgate".into()
}

impl Config {
    /// Loads, expands and validates the configuration at `path`. `NARROWGATE_LISTEN` overrides `listen`.
    pub fn load(path: &Path) -> Result<Config, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::from_text(path, &text)
    }

    /// What every loader does after parsing: the file it came from, the environment's overrides
    /// (`NARROWGATE_LISTEN`, `NARROWGATE_REPLICA_URL`), and relative paths made absolute.
    pub(crate) fn settle(&mut self, path: &Path) {
        self.source = path.to_path_buf();
        if let Ok(listen) = std::env::var("NARROWGATE_LISTEN") {
            self.listen = listen;
        }
        if let Ok(url) = std::env::var("NARROWGATE_REPLICA_URL") {
            self.replica_url = Some(url);
        }
        self.resolve_paths();
    }

    /// Like [`Config::load`], from the file's text already read; `path` names the file in
    /// messages and anchors its relative paths. Also the entry point for fuzz/.
    pub fn from_text(path: &Path, text: &str) -> Result<Config, LoadError> {
        let mut config: Config = yaml::parse(path, text)?;
        config.settle(path);
        config.validate()?;
        Ok(config)
    }

    /// The folder relative paths in the file are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        base_dir_of(&self.source)
    }

    fn resolve_paths(&mut self) {
        let base = self.base_dir();
        self.contracts = base.join(&self.contracts);
        for upstream in self.upstreams.values_mut() {
            if let Some(cwd) = &upstream.cwd {
                upstream.cwd = Some(base.join(cwd));
            }
            // A command written as a relative path (`../target/debug/x`) is relative to the file;
            // a bare name (`npx`) is looked up on PATH as usual.
            if let Some(command) = &upstream.command
                && command.contains('/')
                && Path::new(command).is_relative()
            {
                upstream.command = Some(base.join(command).to_string_lossy().into_owned());
            }
        }
        if let Some(oauth) = &mut self.oauth
            && let Some(file) = &oauth.jwks_file
        {
            oauth.jwks_file = Some(base.join(file));
        }
        if let Some(receipts) = &mut self.receipts
            && let Some(path) = &receipts.path
        {
            receipts.path = Some(base.join(path));
        }
    }

    /// A configuration from YAML text, as written (paths unresolved, nothing checked): for the
    /// tests of the modules that read a configuration.
    #[cfg(test)]
    pub fn from_yaml(text: &str) -> Result<Config, LoadError> {
        yaml::parse(Path::new("test.yaml"), text)
    }

    /// The parsed `state` setting.
    pub fn state_backend(&self) -> Result<StateBackend, String> {
        match self.state.as_str() {
            "memory" => Ok(StateBackend::Memory),
            url if url.starts_with("redis://") => Ok(StateBackend::Redis(url.to_string())),
            url if url.starts_with("rediss://") => Err(format!(
                "`{url}`: TLS to Redis is not built in; use redis:// (e.g. to a local TLS tunnel)"
            )),
            other => Err(format!(
                "`{other}` must be `memory` or a redis://host:port URL"
            )),
        }
    }

    /// This replica's MCP endpoint for the other replicas: `replica_url`, else `listen` and
    /// `path` when `listen` is a concrete address.
    pub fn own_replica_url(&self) -> Option<String> {
        if let Some(url) = &self.replica_url {
            return Some(url.clone());
        }
        let listen = self.listen_addr();
        (!listen.ip().is_unspecified()).then(|| format!("http://{listen}{}", self.path))
    }

    /// The socket address to listen on (validated at load).
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen
            .parse()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 8080)))
    }
}

/// The folder of a file, for resolving paths written relative to it.
pub fn base_dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `[a-z0-9_-]{1,32}`.
pub fn valid_upstream_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests;
