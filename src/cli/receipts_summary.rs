//! `narrowgate receipts --summary`: each upstream's and each tool's calls by outcome, and the
//! latency percentiles of the calls sent upstream, over a window, from the raw receipts. The
//! status page draws the same numbers from its summaries (`receipts::traffic`); this command
//! reads every receipt of the window, so it is the check on the page, and the answer when no
//! browser is at hand.

use std::io::{self, Write};
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::receipts::Outcome;
use crate::receipts::query::Source;
use crate::receipts::traffic::{Tally, Totals};

/// The window when `--since` is not given: the status page's default.
const DEFAULT_SINCE: Duration = Duration::from_secs(3600);

/// Exit status as for the listing: 0 printed, 1 the database cannot be read or stdout written.
pub fn run(source: &Source, since: Option<Duration>, json: bool) -> ExitCode {
    let since = since.unwrap_or(DEFAULT_SINCE);
    let totals = match source.tally(since) {
        Ok(minutes) => minutes.totals(),
        Err(e) => {
            eprintln!("narrowgate: {e}");
            return ExitCode::FAILURE;
        }
    };
    let printed = super::check::write_stdout("the summary", |out| {
        if json {
            writeln!(out, "{}", as_json(&totals, since))
        } else {
            print_table(out, &totals, since, source)
        }
    });
    if printed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `{"since_seconds", "upstreams": [{name, calls, outcomes{…every outcome…}, p50_ms, p99_ms}],
/// "tools": [{name, upstream, …}]}`, both lists by name.
fn as_json(totals: &Totals, since: Duration) -> Value {
    let numbers = |tally: &Tally| {
        let outcomes: Map<String, Value> = Outcome::ALL
            .iter()
            .map(|o| (o.as_str().to_string(), json!(tally.count(*o))))
            .collect();
        json!({
            "calls": tally.calls(),
            "outcomes": outcomes,
            "p50_ms": tally.p50(),
            "p99_ms": tally.p99(),
        })
    };
    let with = |mut numbers: Value, fields: &[(&str, Value)]| {
        if let Some(object) = numbers.as_object_mut() {
            for (name, value) in fields {
                object.insert((*name).to_string(), value.clone());
            }
        }
        numbers
    };
    let upstreams: Vec<Value> = totals
        .upstreams
        .iter()
        .map(|(name, tally)| with(numbers(tally), &[("name", json!(name))]))
        .collect();
    let tools: Vec<Value> = totals
        .tools
        .iter()
        .map(|(name, (upstream, tally))| {
            with(
                numbers(tally),
                &[("name", json!(name)), ("upstream", json!(upstream))],
            )
        })
        .collect();
    json!({"since_seconds": since.as_secs(), "upstreams": upstreams, "tools": tools})
}

fn print_table(
    out: &mut dyn Write,
    totals: &Totals,
    since: Duration,
    source: &Source,
) -> io::Result<()> {
    writeln!(
        out,
        "calls that ended in the last {}, from {source}; latency of the calls sent upstream",
        span(since)
    )?;
    let mut header = vec!["KIND".to_string(), "NAME".into(), "CALLS".into()];
    header.extend(Outcome::ALL.iter().map(|o| o.as_str().to_uppercase()));
    header.extend(["P50_MS".into(), "P99_MS".into()]);
    let row = |kind: &str, name: &str, tally: &Tally| {
        let mut cells = vec![
            kind.to_string(),
            name.to_string(),
            tally.calls().to_string(),
        ];
        cells.extend(Outcome::ALL.iter().map(|o| tally.count(*o).to_string()));
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        cells.extend([ms(tally.p50()), ms(tally.p99())]);
        cells
    };
    let mut rows: Vec<Vec<String>> = totals
        .upstreams
        .iter()
        .map(|(name, tally)| row("upstream", name, tally))
        .collect();
    rows.extend(
        totals
            .tools
            .iter()
            .map(|(name, (_, tally))| row("tool", name, tally)),
    );
    if rows.is_empty() {
        return writeln!(out, "no calls in that window");
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        // Names left-aligned, numbers right-aligned under their headers.
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, width))| match i {
                0 | 1 => format!("{cell:<width$}"),
                _ => format!("{cell:>width$}"),
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// `90s`, `15m`, `1h`, `7d`: the largest unit that divides it, as `--since` is written.
fn span(since: Duration) -> String {
    let seconds = since.as_secs();
    match seconds {
        0 => "0s".to_string(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
