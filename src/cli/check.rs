//! `narrowgate check`: is this configuration safe to serve? Loads everything, and unless
//! `--offline`, asks each upstream for its tools and reports per tool what `serve` would do.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::contract::narrow::Verdict;
use crate::gateway::catalog::{Catalog, Entry};
use crate::upstream::{Snapshot, Status, Upstream, list_tools_once};

const CONNECT_WITHIN: Duration = Duration::from_secs(60);

pub fn run(config_path: &Path, offline: bool, as_json: bool) -> ExitCode {
    let (config, contracts) = match super::load(config_path) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("narrowgate check: {e}");
            return ExitCode::from(2);
        }
    };
    let snapshots: BTreeMap<String, Snapshot> = if offline {
        BTreeMap::new()
    } else {
        let runtime = match super::runtime() {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("narrowgate check: cannot start the runtime: {e}");
                return ExitCode::from(2);
            }
        };
        runtime.block_on(async {
            let mut tasks = Vec::new();
            for (name, u) in &config.upstreams {
                let upstream = Upstream::new(name, u);
                tasks.push(tokio::spawn(async move {
                    let result = list_tools_once(&upstream, CONNECT_WITHIN).await;
                    (upstream.name.clone(), result)
                }));
            }
            let mut snapshots = BTreeMap::new();
            for task in tasks {
                if let Ok((name, result)) = task.await {
                    let snapshot = match result {
                        Ok(tools) => Snapshot {
                            status: Status::Up,
                            tools: Arc::new(tools),
                        },
                        Err(reason) => Snapshot {
                            status: Status::Down { reason },
                            tools: Arc::new(vec![]),
                        },
                    };
                    snapshots.insert(name, snapshot);
                }
            }
            snapshots
        })
    };

    let mut problems = 0;
    let mut upstream_rows = Vec::new();
    for name in config.upstreams.keys() {
        let state = match snapshots.get(name).map(|s| &s.status) {
            None => json!({"name": name, "state": "not contacted (offline)"}),
            Some(Status::Up) => {
                json!({"name": name, "state": "up", "tools": snapshots[name].tools.len()})
            }
            Some(Status::Down { reason }) => {
                problems += 1;
                json!({"name": name, "state": "down", "reason": reason})
            }
            Some(Status::Starting) => json!({"name": name, "state": "starting"}),
        };
        upstream_rows.push(state);
    }

    let mut tool_rows = Vec::new();
    if offline {
        for (name, contract) in &contracts.tools {
            let row = if config.upstreams.contains_key(&contract.upstream) {
                json!({"tool": name, "upstream": contract.upstream, "status": "loaded",
                       "pin": if contract.pin.is_some() { "pinned (not verified offline)" } else { "unpinned" }})
            } else {
                problems += 1;
                json!({"tool": name, "upstream": contract.upstream, "status": "disabled",
                       "reason": format!("upstream `{}` is not configured", contract.upstream)})
            };
            tool_rows.push(row);
        }
    } else {
        let catalog = Catalog::build(&contracts, &snapshots);
        for (name, entry) in &catalog.entries {
            let row = match entry {
                Entry::Disabled { contract, reason } => {
                    problems += 1;
                    json!({"tool": name, "upstream": contract.upstream, "status": "disabled", "reason": reason})
                }
                Entry::Exposed(tool) => match &tool.upstream_schemas {
                    None => {
                        problems += 1;
                        json!({"tool": name, "upstream": tool.contract.upstream, "status": "unavailable",
                               "reason": "the upstream could not be contacted"})
                    }
                    Some(s) => {
                        let narrowing = match &s.verdict {
                            Verdict::Narrower => json!({"verdict": "narrower"}),
                            Verdict::Wider { path } => {
                                problems += 1;
                                json!({"verdict": "wider", "path": path})
                            }
                            Verdict::Empty => json!({"verdict": "empty"}),
                            Verdict::Unproven { reason } => {
                                json!({"verdict": "unproven", "reason": reason})
                            }
                        };
                        json!({"tool": name, "upstream": tool.contract.upstream, "status": "enabled",
                               "narrowing": narrowing,
                               "pin": if tool.contract.pin.is_some() { "matches" } else { "unpinned" },
                               "upstream_digest": s.digest})
                    }
                },
            };
            tool_rows.push(row);
        }
    }

    let report = json!({"ok": problems == 0, "problems": problems, "upstreams": upstream_rows, "tools": tool_rows});
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print_table(&report);
    }
    if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn print_table(report: &Value) {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    println!("UPSTREAM             STATE");
    for u in report["upstreams"].as_array().into_iter().flatten() {
        let mut state = text(u, "state");
        if let Some(n) = u.get("tools") {
            state = format!("{state} ({n} tools)");
        }
        if let Some(reason) = u.get("reason").and_then(Value::as_str) {
            state = format!("{state}: {reason}");
        }
        println!("{:<20} {state}", text(u, "name"));
    }
    println!();
    println!(
        "{:<28} {:<12} {:<10} {:<26} PIN",
        "TOOL", "UPSTREAM", "STATUS", "NARROWING"
    );
    for t in report["tools"].as_array().into_iter().flatten() {
        let narrowing = match t.get("narrowing") {
            Some(n) => match (
                n.get("verdict").and_then(Value::as_str),
                n.get("path").and_then(Value::as_str),
            ) {
                (Some("wider"), Some(path)) => format!("WIDER at {path}"),
                (Some(v), _) => v.to_string(),
                _ => String::new(),
            },
            None => String::new(),
        };
        println!(
            "{:<28} {:<12} {:<10} {:<26} {}",
            text(t, "tool"),
            text(t, "upstream"),
            text(t, "status"),
            narrowing,
            text(t, "pin")
        );
        if let Some(reason) = t.get("reason").and_then(Value::as_str) {
            println!("    reason: {reason}");
        }
        if let Some(digest) = t.get("upstream_digest").and_then(Value::as_str) {
            println!("    upstream digest: {digest}");
        }
    }
    let problems = report["problems"].as_u64().unwrap_or(0);
    println!();
    if problems == 0 {
        println!("ok: no problems found");
    } else {
        println!("{problems} problem(s) found");
    }
}
