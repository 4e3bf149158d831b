//! `narrowgate check`: is this configuration safe to serve? It loads the configuration and every
//! contract exactly as `serve` does, and unless `--offline` asks each upstream for its tools and
//! reports, per tool, what `serve` would do with it: enabled or disabled (and why), the narrowing
//! verdict, and whether the `pin` still matches the upstream's definition.
//!
//! Exit status, so that an operator's CI can stop a contract change that widens a tool:
//! 0 nothing to fix; 1 problems found (a disabled tool, a contract wider than its upstream, an
//! `output` no upstream result can satisfy, a pin mismatch, an unreachable upstream, a contract
//! naming a missing upstream or tool); 2 the configuration or a contract cannot be loaded at all
//! (or the report cannot be written). A reader that stops early (`| head`) only cuts the report short: the status stays the check's.
//!
//! Every problem of a run is reported at once: all the configuration's (else all the contract
//! files'), and each upstream's and tool's. Only the environment `check` uses must be set
//! (`Needs::Check`); what `serve` will need besides is a warning.
//!
//! `--json` prints one object whose fields are always present (`null` when not applicable), or,
//! with exit status 2, `{ok: false, error, hint, errors: [{error, hint}]}` (the first problem's,
//! then every one):
//! `{ok, offline, config, contracts, problems: [text], warnings: [text],
//!   upstreams: [{name, transport, state: up|down|not_contacted, reason, tools, without_contract}],
//!   tools: [{tool, upstream, upstream_tool, file, status: enabled|disabled|unavailable|loaded,
//!            reason, narrowing: {verdict: narrower|wider|empty|unproven, path, reason} | null,
//!            output_narrowing: (the same, for `output` against the upstream's outputSchema) | null,
//!            pin: matches|mismatch|unpinned|not_checked, pinned, upstream_digest}],
//!   resources: [{resource, kind: uri|glob|template, upstream, file}],
//!   prompts: [{prompt, upstream, upstream_prompt, file, arguments}]}`.
//!
//! The output side is judged like the input side, with one difference: a contract `output` wider
//! than the upstream's outputSchema only promises results that never come (every result is
//! checked against both), so it is a warning; an empty one disables the tool (every call would be
//! rejected), a problem.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::config::{Config, LoadError, Needs, UpstreamTransport};
use crate::contract::narrow::{Verdict, compare_output, narrow};
use crate::contract::{Approval, ContractSet, SideEffects, ToolContract, digest};
use crate::runtime::catalog::{Catalog, Entry};
use rmcp::model::Implementation;

use crate::upstream::{Snapshot, Status, Upstream, list_tools_once};

mod table;
use table::print_table;

/// `narrowgate check --help`: exit status and examples.
pub(super) const AFTER_HELP: &str = "Exit status:
  0  no problems: every tool enabled, narrower than its upstream, pin matching (or unpinned)
  1  problems found: a disabled tool, a contract wider than its upstream, an `output` no
     upstream result can satisfy, a pin mismatch, an unreachable upstream, a contract naming
     a missing upstream or upstream tool
  2  unusable input: the configuration or a contract cannot be loaded (the error names the
     file, the key and what is wrong)

Examples:
  narrowgate check --config config/narrowgate.yaml
  narrowgate check --offline                 # only the files; no upstream is started
  narrowgate check --json | jq '.tools[] | select(.narrowing.verdict != \"narrower\")'
  narrowgate check --json > check.json || exit 1   # in CI: stop a change that widens a tool";

/// How long one upstream may take to start, initialise and list its tools (`npx -y` may have
/// to download its package first).
const CONNECT_WITHIN: Duration = Duration::from_secs(60);

#[derive(Serialize)]
struct Report {
    ok: bool,
    offline: bool,
    config: String,
    contracts: String,
    problems: Vec<String>,
    warnings: Vec<String>,
    upstreams: Vec<UpstreamRow>,
    tools: Vec<ToolRow>,
    resources: Vec<super::check_offer::ResourceRow>,
    prompts: Vec<super::check_offer::PromptRow>,
}

#[derive(Serialize)]
struct UpstreamRow {
    name: String,
    transport: String,
    state: &'static str,
    reason: Option<String>,
    /// How many tools it listed.
    tools: Option<usize>,
    /// Its tools that no contract exposes (invisible to clients: default deny).
    without_contract: Vec<String>,
}

#[derive(Serialize)]
struct ToolRow {
    tool: String,
    upstream: String,
    upstream_tool: String,
    file: String,
    status: &'static str,
    reason: Option<String>,
    narrowing: Option<Narrowing>,
    output_narrowing: Option<Narrowing>,
    pin: &'static str,
    pinned: Option<String>,
    upstream_digest: Option<String>,
}

#[derive(Serialize)]
struct Narrowing {
    verdict: &'static str,
    path: Option<String>,
    reason: Option<String>,
}

pub fn run(config_path: &Path, offline: bool, as_json: bool) -> ExitCode {
    let (config, contracts) = match super::load_all(config_path, &Needs::Check { offline }) {
        Ok(loaded) => loaded,
        Err(errors) => {
            // Every problem, each with what to do about it: one run names them all.
            let hints: Vec<String> = errors.iter().map(|e| hint(e, config_path)).collect();
            for (e, hint) in errors.iter().zip(&hints) {
                eprintln!("narrowgate check: {e}");
                eprintln!("  {hint}");
            }
            if errors.len() > 1 {
                eprintln!("narrowgate check: {} problems", errors.len());
            }
            if as_json {
                // CI scripts that parse stdout still get one JSON object: `error` and `hint`
                // are the first problem's, `errors` lists them all.
                let all: Vec<Value> = errors
                    .iter()
                    .zip(&hints)
                    .map(|(e, hint)| serde_json::json!({"error": e.to_string(), "hint": hint}))
                    .collect();
                let error = serde_json::json!({"ok": false,
                    "error": errors.first().map(ToString::to_string),
                    "hint": hints.first(), "errors": all});
                write_stdout("check", |out| writeln!(out, "{error}"));
            }
            return ExitCode::from(2);
        }
    };
    let snapshots = if offline {
        None
    } else {
        match super::runtime(None) {
            Ok(rt) => Some(rt.block_on(contact(&config, &contracts))),
            Err(e) => {
                eprintln!("narrowgate check: cannot start the runtime: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let mut report = build_report(
        &config,
        &contracts,
        snapshots.as_ref().map(|(snapshots, _)| snapshots),
    );
    if let Some((_, servers)) = &snapshots {
        let drifted = super::check_written_for::warnings(&contracts, servers);
        report.warnings.extend(drifted);
    }
    let printed = if as_json {
        match serde_json::to_string_pretty(&report) {
            Ok(text) => write_stdout("check", |out| writeln!(out, "{text}")),
            Err(e) => {
                eprintln!("narrowgate check: cannot print the report: {e}");
                false
            }
        }
    } else {
        write_stdout("check", |out| print_table(out, &report))
    };
    if !printed {
        return ExitCode::from(2);
    }
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// What to do about a load error, in one line.
pub(super) fn hint(e: &LoadError, config_path: &Path) -> String {
    match e {
        LoadError::Read { path, .. } if path == config_path => format!(
            "pass the configuration with --config FILE (or NARROWGATE_CONFIG); {} was tried",
            config_path.display()
        ),
        LoadError::Read { .. } => {
            "check the path: relative paths in the configuration are relative to its folder".into()
        }
        LoadError::Syntax { .. } => "fix the YAML syntax at the position shown".into(),
        LoadError::Invalid { path, .. } if path == config_path => {
            "fix that key in that file: docs/configuration.md lists the keys and their values \
             (`narrowgate schema config` prints them as a JSON Schema)"
                .into()
        }
        LoadError::Invalid { .. } => "fix that key in that contract file: docs/contracts.md lists \
             the keys and their values (`narrowgate schema contract` prints them as a JSON Schema)"
            .into(),
    }
}

/// Lists every upstream's tools once, all at the same time: a snapshot of each, and each
/// server's name and version as it reported them.
async fn contact(
    config: &Config,
    contracts: &ContractSet,
) -> (BTreeMap<String, Snapshot>, BTreeMap<String, Implementation>) {
    let mut tasks = Vec::new();
    for (name, u) in &config.upstreams {
        let upstream = Upstream::new(name, u);
        // As `serve` connects: a server may list some tools only to hosts of an extension.
        upstream.declare_extensions(contracts.used_extensions(name));
        tasks.push(tokio::spawn(async move {
            let result = list_tools_once(&upstream, CONNECT_WITHIN).await;
            (upstream.name.clone(), result)
        }));
    }
    let mut snapshots = BTreeMap::new();
    let mut servers = BTreeMap::new();
    for (task, name) in tasks.into_iter().zip(config.upstreams.keys()) {
        let result = match task.await {
            Ok((_, result)) => result,
            Err(e) => Err(format!("the check of this upstream failed: {e}")),
        };
        let snapshot = match result {
            Ok(listing) => {
                if let Some(server) = listing.server {
                    servers.insert(name.clone(), server);
                }
                Snapshot {
                    status: Status::Up,
                    tools: Arc::new(listing.tools),
                    protocol: None,
                }
            }
            Err(reason) => Snapshot {
                status: Status::Down { reason },
                tools: Arc::new(vec![]),
                protocol: None,
            },
        };
        snapshots.insert(name.clone(), snapshot);
    }
    (snapshots, servers)
}

/// Irreversible tools nobody approves, and approvals nobody can give.
fn approval_warnings(config: &Config, contracts: &ContractSet, warnings: &mut Vec<String>) {
    for (name, contract) in &contracts.tools {
        let file = contract.file.display();
        match contract.approval {
            Approval::None if contract.side_effects == SideEffects::Irreversible => {
                warnings.push(format!(
                    "tool `{name}` ({file}) has irreversible side effects and `approval: none`: \
                     every call takes effect at once (consider `approval: user` or `approver`)"
                ));
            }
            Approval::Approver if config.approvers.is_empty() => {
                warnings.push(format!(
                    "tool `{name}` ({file}) has `approval: approver` but the configuration lists \
                     no `approvers`: every call will time out"
                ));
            }
            _ => {}
        }
    }
}

fn build_report(
    config: &Config,
    contracts: &ContractSet,
    snapshots: Option<&BTreeMap<String, Snapshot>>,
) -> Report {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let config_file = config.source.display().to_string();

    let mut upstreams = Vec::new();
    for (name, u) in &config.upstreams {
        let transport = match u.transport() {
            UpstreamTransport::Stdio { command, .. } => format!("stdio: {command}"),
            UpstreamTransport::Http { url, .. } => format!("http: {url}"),
        };
        let mut row = UpstreamRow {
            name: name.clone(),
            transport,
            state: "not_contacted",
            reason: None,
            tools: None,
            without_contract: vec![],
        };
        match snapshots.and_then(|s| s.get(name)).map(|s| (&s.status, s)) {
            None | Some((Status::Starting, _)) => {}
            Some((Status::Up, snapshot)) => {
                let contracted: BTreeSet<&str> = contracts
                    .tools
                    .values()
                    .filter(|c| c.upstream == *name)
                    .map(|c| c.upstream_tool.as_str())
                    .collect();
                row.state = "up";
                row.tools = Some(snapshot.tools.len());
                row.without_contract = snapshot
                    .tools
                    .iter()
                    .map(|t| t.name.to_string())
                    .filter(|t| !contracted.contains(t.as_str()))
                    .collect();
            }
            Some((Status::Down { reason }, _)) => {
                problems.push(format!(
                    "upstream `{name}` is unreachable: {reason} (check `upstreams.{name}` in {config_file})"
                ));
                row.state = "down";
                row.reason = Some(reason.clone());
            }
        }
        upstreams.push(row);
    }

    if contracts.tools.is_empty() {
        warnings.push(format!(
            "no tool contracts in {}: clients see no tools (write one with `narrowgate init`)",
            config.contracts.display()
        ));
    }
    approval_warnings(config, contracts, &mut warnings);
    warnings.extend(super::check_reach::unreachable(config, contracts));
    warnings.extend(super::check_reach::environment(config));
    warnings.extend(contracts.ui_warnings());
    let catalog = snapshots.map(|s| Catalog::build(contracts, s));
    let mut tools = Vec::new();
    for (name, contract) in &contracts.tools {
        let mut row = ToolRow {
            tool: name.clone(),
            upstream: contract.upstream.clone(),
            upstream_tool: contract.upstream_tool.clone(),
            file: contract.file.display().to_string(),
            status: "loaded",
            reason: None,
            narrowing: None,
            output_narrowing: None,
            pin: if contract.pin.is_some() {
                "not_checked"
            } else {
                "unpinned"
            },
            pinned: contract.pin.clone(),
            upstream_digest: None,
        };
        // Preconditions see the arguments as sent upstream, the fixed ones included.
        let mut seen = contract.input.clone();
        if let Some(schema) = seen.as_object_mut() {
            let properties = schema
                .entry("properties")
                .or_insert_with(|| serde_json::json!({}));
            for fixed in contract.fixed.names() {
                if let Some(properties) = properties.as_object_mut() {
                    properties.insert(fixed.to_string(), Value::Bool(true));
                }
            }
        }
        warnings.extend(crate::contract::when::warnings(name, &contract.when, &seen));
        if !config.upstreams.contains_key(&contract.upstream) {
            let reason = format!(
                "upstream `{}` is not configured: add it under `upstreams:` in {config_file} or fix `upstream:` in {}",
                contract.upstream, row.file
            );
            problems.push(format!("tool `{name}`: {reason}"));
            row.status = "disabled";
            row.reason = Some(reason);
            tools.push(row);
            continue;
        }
        let (Some(snapshots), Some(catalog)) = (snapshots, &catalog) else {
            tools.push(row);
            continue;
        };
        let Some(snapshot) = snapshots.get(&contract.upstream) else {
            tools.push(row);
            continue;
        };
        if snapshot.status != Status::Up {
            row.status = "unavailable";
            row.reason = Some(format!(
                "upstream `{}` could not be contacted",
                contract.upstream
            ));
            tools.push(row);
            continue;
        }
        match catalog.entries.get(name) {
            Some(Entry::Exposed(_)) => row.status = "enabled",
            Some(Entry::Disabled { reason, .. }) => {
                row.status = "disabled";
                row.reason = Some(reason.clone());
            }
            None => {}
        }
        match snapshot
            .tools
            .iter()
            .find(|t| t.name == contract.upstream_tool.as_str())
        {
            None => {
                let listed: Vec<&str> = snapshot.tools.iter().map(|t| t.name.as_ref()).collect();
                problems.push(format!(
                    "tool `{name}`: upstream `{}` has no tool `{}` (it lists: {}); fix `upstream_tool` or the tool's name in {}",
                    contract.upstream,
                    contract.upstream_tool,
                    listed.join(", "),
                    row.file
                ));
            }
            Some(upstream_tool) => {
                let upstream_digest = digest::tool_digest(upstream_tool);
                row.pin = match &contract.pin {
                    None => "unpinned",
                    Some(pin) if *pin == upstream_digest => "matches",
                    Some(_) => "mismatch",
                };
                if row.pin == "mismatch" {
                    problems.push(format!(
                        "tool `{name}`: pin mismatch: the upstream's definition of `{}` changed; review it, then set `pin: {upstream_digest}` in {}",
                        contract.upstream_tool, row.file
                    ));
                }
                row.upstream_digest = Some(upstream_digest);
                warnings.extend(super::init_content::withheld_warning(
                    name,
                    contract,
                    upstream_tool,
                ));
                let upstream_input = Value::Object(upstream_tool.input_schema.as_ref().clone());
                for argument in contract.fixed.names() {
                    if upstream_input["properties"].get(argument).is_none() {
                        warnings.push(format!(
                            "tool `{name}`: fixed argument `{argument}` is not a property of the upstream's inputSchema: check its spelling"
                        ));
                    }
                }
                let narrowing = narrow(
                    &contract.input,
                    &contract.fixed.without_fixed(&upstream_input),
                );
                if let Some(reason) = &narrowing.upstream_omitted {
                    warnings.push(format!(
                        "tool `{name}`: the upstream's inputSchema is enforced but not published ({reason}); clients see the contract's `input` alone"
                    ));
                }
                let verdict = narrowing.verdict;
                judge(name, contract, &verdict, &mut problems, &mut warnings);
                row.narrowing = Some(narrowing_of(verdict));
                if let (Some(mine), Some(theirs)) =
                    (&contract.output, upstream_tool.output_schema.as_deref())
                {
                    let verdict = compare_output(mine, &Value::Object(theirs.clone()));
                    judge_output(name, contract, &verdict, &mut problems, &mut warnings);
                    row.output_narrowing = Some(narrowing_of(verdict));
                }
                let empty =
                    |n: &Option<Narrowing>| n.as_ref().is_some_and(|n| n.verdict == "empty");
                // Disabled for a reason the checks above did not already report (say, an
                // upstream schema that cannot be compiled).
                if let Some(reason) = &row.reason
                    && row.pin != "mismatch"
                    && !empty(&row.narrowing)
                    && !empty(&row.output_narrowing)
                {
                    problems.push(format!("tool `{name}` is disabled: {reason}"));
                }
            }
        }
        tools.push(row);
    }
    let (resources, prompts) = super::check_offer::rows(config, contracts, &mut problems);
    warnings.extend(super::check_offer::link_warnings(contracts, snapshots));
    Report {
        ok: problems.is_empty(),
        offline: snapshots.is_none(),
        config: config_file,
        contracts: config.contracts.display().to_string(),
        problems,
        warnings,
        upstreams,
        tools,
        resources,
        prompts,
    }
}

/// Records what a narrowing verdict means for the operator.
fn judge(
    name: &str,
    contract: &ToolContract,
    verdict: &Verdict,
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let file = contract.file.display();
    match verdict {
        Verdict::Narrower => {}
        Verdict::Wider { path } => problems.push(format!(
            "tool `{name}`: the contract is wider than upstream `{}` at {path}: it admits arguments the upstream rejects; narrow `input` at {path} in {file}",
            contract.upstream
        )),
        Verdict::Empty => problems.push(format!(
            "tool `{name}` is disabled: its `input` and the upstream's inputSchema admit no common arguments; compare them in {file}"
        )),
        // Both schemas are enforced on every call, so this is safe to serve; it is only not proven.
        Verdict::Unproven { reason } => warnings.push(format!(
            "tool `{name}`: could not prove the contract narrower than the upstream ({reason}); both schemas are enforced on every call"
        )),
    }
}

/// Records what the output side's verdict means for the operator.
fn judge_output(
    name: &str,
    contract: &ToolContract,
    verdict: &Verdict,
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let file = contract.file.display();
    match verdict {
        Verdict::Narrower => {}
        Verdict::Wider { path } => warnings.push(format!(
            "tool `{name}`: the contract's `output` admits results that upstream `{}`'s outputSchema rules out, at {path}: they never arrive (every result is checked against both); narrow `output` at {path} in {file} so the published outputSchema says what clients get",
            contract.upstream
        )),
        Verdict::Empty => problems.push(format!(
            "tool `{name}` is disabled: its `output` and the upstream's outputSchema admit no common result, so every call would be rejected; compare them in {file}"
        )),
        Verdict::Unproven { reason } => warnings.push(format!(
            "tool `{name}`: could not compare the contract's `output` with the upstream's outputSchema ({reason}); every result is checked against both"
        )),
    }
}

fn narrowing_of(verdict: Verdict) -> Narrowing {
    let (verdict, path, reason) = match verdict {
        Verdict::Narrower => ("narrower", None, None),
        Verdict::Wider { path } => ("wider", Some(path), None),
        Verdict::Empty => ("empty", None, None),
        Verdict::Unproven { reason } => ("unproven", None, Some(reason)),
    };
    Narrowing {
        verdict,
        path,
        reason,
    }
}

/// Writes a command's output on stdout through `write`. A reader that stops early
/// (`narrowgate check --json | head -c 10`) is not an error: the output just ends there, quietly
/// (where `println!` would panic). Any other write error is reported on stderr as
/// `narrowgate COMMAND: ...`; then it returns false.
pub(super) fn write_stdout(
    command: &str,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> bool {
    let mut out = io::BufWriter::new(io::stdout().lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => true,
        Err(e) => {
            eprintln!("narrowgate {command}: cannot write to stdout: {e}");
            false
        }
    }
}
