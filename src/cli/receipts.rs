//! `narrowgate receipts`: list the receipts of past calls, filtered, as a table or JSON. Reads the
//! database read-only, so it works while the gateway is running.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use crate::config::Config;
use crate::config::units::parse_duration;
use crate::receipts::Filter;
use crate::receipts::query::Source;
use crate::receipts::{Outcome, Receipt, Settings};

#[derive(clap::Args)]
pub struct ReceiptsArgs {
    #[command(flatten)]
    config: super::ConfigArg,
    /// Only calls of this exposed tool.
    #[arg(long)]
    tool: Option<String>,
    /// Only calls by this caller.
    #[arg(long)]
    caller: Option<String>,
    /// Only calls with this outcome: ok, tool_error, denied, rejected_input, rejected_output,
    /// rate_limited, timeout, unknown or upstream_error.
    #[arg(long, value_parser = outcome)]
    outcome: Option<Outcome>,
    /// Only calls that arrived within this long before now, e.g. 90s, 15m, 1h, 7d.
    #[arg(long, value_parser = parse_duration)]
    since: Option<Duration>,
    /// Only the most recent N matching calls (default: all).
    #[arg(long)]
    limit: Option<u64>,
    /// Print a JSON array of receipts (one per line) instead of a table.
    #[arg(long)]
    json: bool,
    /// Instead of the receipts, each upstream's and each tool's calls by outcome and latency
    /// percentiles (p50, p99 of the calls sent upstream) over `--since` (default 1h): the
    /// numbers of the status page's charts, read from the raw receipts.
    #[arg(long, conflicts_with_all = ["tool", "caller", "outcome", "limit"])]
    summary: bool,
    /// Read this receipts database instead of the one the configuration names: a SQLite file, or
    /// a PostgreSQL URL (postgres://…). No configuration is loaded: for a machine without the
    /// gateway's environment (its `${VAR}`s, its `api_key_env` keys), or a copy of the file.
    #[arg(long, value_name = "FILE|URL")]
    db: Option<std::path::PathBuf>,
}

fn outcome(text: &str) -> Result<Outcome, String> {
    Outcome::parse(text).ok_or_else(|| {
        let names: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        format!(
            "`{text}` is not an outcome: use one of {}",
            names.join(", ")
        )
    })
}

/// Exit status: 0 listed (possibly nothing, or cut short by a reader that stopped early), 1 the
/// database cannot be read or stdout cannot be written, 2 unusable input.
pub fn run(args: ReceiptsArgs) -> ExitCode {
    let source = match args.db {
        Some(db) => Source::named(&db),
        // Only the receipts block's environment is needed, not the callers' keys.
        None => match Config::load_for(
            &args.config.config,
            &crate::config::Needs::Parts(&["receipts"]),
        )
        .map_err(|mut errors| errors.swap_remove(0))
        {
            Ok(config) => Source::of(&Settings::of(&config)),
            Err(e) => {
                eprintln!(
                    "narrowgate: {e}\nnarrowgate: to read the receipts without the gateway's \
                     configuration and environment, name the database: --db FILE"
                );
                return ExitCode::from(2);
            }
        },
    };
    if args.summary {
        return super::receipts_summary::run(&source, args.since, args.json);
    }
    let filter = Filter {
        tool: args.tool,
        caller: args.caller,
        outcome: args.outcome,
        since: args.since,
        limit: args.limit,
    };
    let receipts = match source.receipts(&filter) {
        Ok(receipts) => receipts,
        Err(e) => {
            eprintln!("narrowgate: {e}");
            return ExitCode::FAILURE;
        }
    };
    if receipts.is_empty() && !args.json {
        eprintln!("no matching receipts in {source}");
        return ExitCode::SUCCESS;
    }
    let printed = super::check::write_stdout("receipts", |out| {
        if args.json {
            print_json(out, &receipts)
        } else {
            print_table(out, &receipts)
        }
    });
    if printed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A JSON array with one receipt per line: one document for `jq`/`json.load`, and still easy to
/// read or grep line by line.
fn print_json(out: &mut dyn Write, receipts: &[Receipt]) -> io::Result<()> {
    let lines: Vec<String> = receipts
        .iter()
        .filter_map(|r| serde_json::to_string(r).ok())
        .collect();
    if lines.is_empty() {
        writeln!(out, "[]")
    } else {
        writeln!(out, "[\n{}\n]", lines.join(",\n"))
    }
}

/// `approved by ops-lead after 12.3s (ID)`, or `-` for a call that needed no approval.
fn approval_cell(r: &Receipt) -> String {
    let Some(decision) = &r.approval_decision else {
        return "-".to_string();
    };
    let mut cell = decision.clone();
    if let Some(approver) = &r.approver {
        cell.push_str(&format!(" by {approver}"));
    }
    if let Some(wait) = r.approval_wait_ms {
        cell.push_str(&format!(" after {:.1}s", wait / 1000.0));
    }
    if let Some(id) = &r.approval_id {
        cell.push_str(&format!(" ({id})"));
    }
    cell
}

/// The outcome, with what else the receipt says of it: the typed error when it is not the
/// outcome's own name, a replay, a cache hit, the fallback taken.
fn outcome_cell(r: &Receipt) -> String {
    let mut cell = r.outcome.clone();
    if let Some(t) = r.error_type.as_deref().filter(|t| *t != r.outcome) {
        cell.push_str(&format!(" [{t}]"));
    }
    if r.replayed {
        cell.push_str(" (replayed)");
    }
    if r.cached {
        cell.push_str(" (cached)");
    }
    if let Some(f) = &r.fallback {
        cell.push_str(&format!(" -> {f}"));
    }
    cell
}

fn print_table(out: &mut dyn Write, receipts: &[Receipt]) -> io::Result<()> {
    let header = [
        "TIME", "CALLER", "TOOL", "UPSTREAM", "OUTCOME", "ATTEMPTS", "MS", "APPROVAL", "ID",
        "REASON",
    ]
    .map(String::from);
    let rows: Vec<[String; 10]> = receipts
        .iter()
        .map(|r| {
            let upstream = match (&r.upstream, &r.upstream_tool) {
                (Some(u), Some(t)) => format!("{u}/{t}"),
                _ => "-".to_string(),
            };
            let outcome = outcome_cell(r);
            [
                r.time.clone(),
                r.caller.clone(),
                r.tool.clone(),
                upstream,
                outcome,
                r.attempts.to_string(),
                format!("{:.1}", r.duration_ms),
                approval_cell(r),
                r.id.clone(),
                // Last, being free text: why a call was refused (the precondition that denied it).
                r.reason.clone().unwrap_or_else(|| "-".to_string()),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}
