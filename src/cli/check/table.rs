//! `narrowgate check`'s report as a table for people (the `--json` form is `Report` itself).

use std::io::{self, Write};

use super::*;

pub(super) fn print_table(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    writeln!(out, "config:    {}", report.config)?;
    writeln!(out, "contracts: {}", report.contracts)?;
    writeln!(out)?;
    let rows: Vec<[String; 3]> = report
        .upstreams
        .iter()
        .map(|u| {
            let detail = match (u.state, &u.reason, u.tools) {
                ("up", _, Some(n)) if u.without_contract.is_empty() => format!("{n} tools"),
                ("up", _, Some(n)) => format!(
                    "{n} tools, {} without a contract (not exposed)",
                    u.without_contract.len()
                ),
                (_, Some(reason), _) => reason.clone(),
                ("not_contacted", ..) => "skipped with --offline".into(),
                _ => String::new(),
            };
            let state = match u.state {
                "down" => "DOWN".to_string(),
                other => other.replace('_', " "),
            };
            [u.name.clone(), state, detail]
        })
        .collect();
    print_columns(out, &["UPSTREAM", "STATE", "DETAIL"], &rows, |_| vec![])?;
    writeln!(out)?;
    let rows: Vec<[String; 5]> = report
        .tools
        .iter()
        .map(|t| {
            let narrowing = match &t.narrowing {
                None => "-".into(),
                Some(n) => match (&n.path, n.verdict) {
                    (Some(path), "wider") => format!("WIDER at {path}"),
                    (_, "empty") => "EMPTY".into(),
                    (_, verdict) => verdict.to_string(),
                },
            };
            [
                t.tool.clone(),
                t.upstream.clone(),
                t.status.to_string(),
                narrowing,
                t.pin.replace('_', " "),
            ]
        })
        .collect();
    print_columns(
        out,
        &["TOOL", "UPSTREAM", "STATUS", "NARROWING", "PIN"],
        &rows,
        |i| {
            let t = &report.tools[i];
            let mut extra = Vec::new();
            if let Some(reason) = &t.reason {
                extra.push(format!("reason: {reason}"));
            }
            if let Some(digest) = &t.upstream_digest
                && t.pin != "matches"
            {
                extra.push(format!("upstream digest (for `pin:`): {digest}"));
            }
            if let Some(Narrowing {
                reason: Some(reason),
                ..
            }) = &t.narrowing
            {
                extra.push(format!("not proven: {reason}"));
            }
            if let Some(n) = &t.output_narrowing
                && n.verdict != "narrower"
            {
                let at = n
                    .path
                    .as_deref()
                    .map(|p| format!(" at {p}"))
                    .unwrap_or_default();
                extra.push(format!("output: {}{at}", n.verdict));
            }
            extra
        },
    )?;
    writeln!(out)?;
    crate::cli::check_offer::print(out, &report.resources, &report.prompts)?;
    for w in &report.warnings {
        writeln!(out, "warning: {w}")?;
    }
    if report.problems.is_empty() {
        writeln!(out, "ok: no problems found")?;
    } else {
        writeln!(out, "{} problem(s) found:", report.problems.len())?;
        for p in &report.problems {
            writeln!(out, "  - {p}")?;
        }
    }
    Ok(())
}

/// Prints left-aligned columns sized to their content, each row followed by its indented notes.
fn print_columns<const N: usize>(
    out: &mut dyn Write,
    header: &[&str; N],
    rows: &[[String; N]],
    notes: impl Fn(usize) -> Vec<String>,
) -> io::Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut line = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        line.trim_end().to_string()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for (i, row) in rows.iter().enumerate() {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
        for note in notes(i) {
            writeln!(out, "    {note}")?;
        }
    }
    Ok(())
}
