//! The traffic panel of the status page: per upstream and per tool, the calls per minute by
//! outcome group and the latency p50 and p99 over a window (15 minutes, an hour, a day), with
//! the current state, the numbers of every bar in a table beside its chart, and the window's
//! totals. Read from the receipts' per-minute summary ([`crate::receipts::traffic`]), so a day's
//! chart costs the same however many receipts the store holds.
//!
//! Drawn on the server as inline SVG: the page's Content-Security-Policy allows its own style and
//! script only, so no chart library and no `style` attributes (SVG presentation attributes such
//! as `fill` are not styles). Colour is never the only cue: each outcome group has a fill pattern
//! of its own, p99 is dashed where p50 is solid, and every bar tells its numbers on hover and in
//! the table. Coordinates are integers and each outcome group is one `<path>` per chart, to keep
//! the page small.

mod svg;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::html::{escape, time};
use crate::receipts::Outcome;
use crate::receipts::format_utc_millis;
use crate::receipts::traffic::{Series, Tally, Traffic, Window};

/// Tools with a chart of their own, the most called first; the others are in the totals only
/// (a gateway may publish hundreds of tools, and the page must stay readable).
pub const CHARTED_TOOLS: usize = 12;

/// The outcomes a chart stacks together, in stacking order (bottom first).
struct Group {
    name: &'static str,
    outcomes: &'static [Outcome],
    /// A colour, or one of [`PATTERNS`].
    fill: &'static str,
}

const GROUPS: [Group; 4] = [
    Group {
        name: "ok",
        outcomes: &[Outcome::Ok],
        fill: "#2e8540",
    },
    Group {
        name: "refused",
        outcomes: &[
            Outcome::Denied,
            Outcome::RejectedInput,
            Outcome::RejectedOutput,
            Outcome::RateLimited,
        ],
        fill: "url(#tg-refused)",
    },
    Group {
        name: "errors",
        outcomes: &[Outcome::ToolError, Outcome::Timeout, Outcome::UpstreamError],
        fill: "url(#tg-errors)",
    },
    Group {
        name: "unknown",
        outcomes: &[Outcome::Unknown],
        fill: "url(#tg-unknown)",
    },
];

/// The groups' fill patterns, once per page (every chart's `url(#…)` points here): amber with
/// diagonal lines, red cross-hatched, purple dots.
const PATTERNS: &str = "<svg class=\"defs\" width=\"0\" height=\"0\" aria-hidden=\"true\"><defs>\
    <pattern id=\"tg-refused\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
    patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f2c14e\"/>\
    <path d=\"M1,0v6\" stroke=\"#7a4f00\" stroke-width=\"2\"/></pattern>\
    <pattern id=\"tg-errors\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
    patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f4a7a7\"/>\
    <path d=\"M1,0v6M0,1h6\" stroke=\"#b00020\" stroke-width=\"2\"/></pattern>\
    <pattern id=\"tg-unknown\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\">\
    <rect width=\"5\" height=\"5\" fill=\"#e2d6f3\"/>\
    <circle cx=\"2.5\" cy=\"2.5\" r=\"1.4\" fill=\"#5b2a86\"/></pattern></defs></svg>";

/// What the traffic panel is drawn from.
pub(crate) struct Panel<'a> {
    pub window: Window,
    pub traffic: &'a Result<Traffic, String>,
    /// Each configured upstream and its state (`up`, `down`, `starting`), in the page's order.
    pub upstreams: Vec<(&'a str, &'a str)>,
    /// Each contract's tool and its state (`enabled`, `disabled`, `unavailable`).
    pub tools: BTreeMap<&'a str, &'a str>,
    /// The page's other query parameters, encoded, for the window links to keep.
    pub others: &'a str,
}

/// The panel: window links, then the charts, then the totals.
pub(crate) fn section(page: &mut String, panel: &Panel) {
    page.push_str(
        "<section id=\"traffic\"><h2>Traffic</h2><nav class=\"windows\" aria-label=\"window\">",
    );
    for window in Window::ALL {
        let current = match window == panel.window {
            true => " aria-current=\"page\"",
            false => "",
        };
        let amp = if panel.others.is_empty() { "" } else { "&amp;" };
        let _ = write!(
            page,
            "<a href=\"/status?{}{amp}window={window}\"{current}>last {}</a>",
            escape(panel.others),
            span(window),
        );
    }
    page.push_str("</nav>");
    let traffic = match panel.traffic {
        Ok(traffic) => traffic,
        Err(e) => {
            let _ = write!(
                page,
                "<p class=\"error\">the traffic cannot be read: {}</p></section>",
                escape(e)
            );
            return;
        }
    };
    if let Some(minute) = traffic.missing_before {
        let _ = write!(
            page,
            "<p class=\"note\">Charts before {} are still being summarised: calls before then \
             are missing from them for now.</p>",
            time(&format_utc_millis(minute.saturating_mul(60_000)))
        );
    }
    page.push_str(PATTERNS);
    legend(page);
    page.push_str("<h3>Upstreams</h3><div class=\"charts\">");
    let upstreams = upstream_rows(panel, traffic);
    for (series, state) in &upstreams {
        svg::chart(page, traffic, "upstream", series, state);
    }
    if upstreams.is_empty() {
        page.push_str("<p class=\"empty\">no upstreams configured</p>");
    }
    page.push_str("</div><h3>Tools</h3><div class=\"charts\">");
    let tools: Vec<(&Series, &str)> = traffic
        .tools
        .iter()
        .map(|s| (s, tool_state(panel, &s.name)))
        .collect();
    for (series, state) in tools.iter().take(CHARTED_TOOLS) {
        svg::chart(page, traffic, "tool", series, state);
    }
    if tools.is_empty() {
        page.push_str("<p class=\"empty\">no calls in this window</p>");
    }
    page.push_str("</div>");
    if tools.len() > CHARTED_TOOLS {
        let _ = write!(
            page,
            "<p class=\"note\">{} more tools had calls: they are in the totals below only.</p>",
            tools.len() - CHARTED_TOOLS
        );
    }
    let _ = write!(
        page,
        "<h3>Totals over the last {}</h3>",
        span(traffic.window)
    );
    let upstreams: Vec<(&Series, &str)> = upstreams.iter().map(|(s, state)| (s, *state)).collect();
    totals(page, traffic.window, "upstream", &upstreams);
    totals(page, traffic.window, "tool", &tools);
    page.push_str(
        "<p class=\"note\">Tools without calls in this window are not listed. Latency: the \
         calls sent upstream only.</p></section>",
    );
}

/// The window in words.
fn span(window: Window) -> &'static str {
    match window {
        Window::FifteenMinutes => "15 minutes",
        Window::Hour => "hour",
        Window::Day => "24 hours",
    }
}

/// Every configured upstream (with no traffic if it had none), then any other upstream with
/// calls in the window (one a reload removed).
fn upstream_rows<'a>(panel: &Panel<'a>, traffic: &'a Traffic) -> Vec<(Series, &'a str)> {
    let mut rows: Vec<(Series, &str)> = panel
        .upstreams
        .iter()
        .map(|(name, state)| {
            let series = traffic.upstreams.iter().find(|s| s.name == *name);
            let series = series.cloned().unwrap_or_else(|| Series {
                name: name.to_string(),
                upstream: None,
                buckets: Vec::new(),
                total: Tally::default(),
            });
            (series, *state)
        })
        .collect();
    for series in &traffic.upstreams {
        if !panel.upstreams.iter().any(|(name, _)| *name == series.name) {
            rows.push((series.clone(), "not configured"));
        }
    }
    rows
}

/// A state as a class name (the style colours some).
fn class(state: &str) -> String {
    state.replace(' ', "-")
}

fn tool_state<'a>(panel: &Panel<'a>, name: &str) -> &'a str {
    panel.tools.get(name).copied().unwrap_or("no contract")
}

/// The swatches and words of every chart, once above them.
fn legend(page: &mut String) {
    page.push_str("<ul class=\"legend\">");
    for group in &GROUPS {
        let names: Vec<&str> = group.outcomes.iter().map(|o| o.as_str()).collect();
        let kinds = match group.outcomes.len() {
            1 => String::new(),
            _ => format!(": {}", names.join(", ")),
        };
        let _ = write!(
            page,
            "<li><svg width=\"14\" height=\"14\" aria-hidden=\"true\"><rect width=\"14\" \
             height=\"14\" fill=\"{}\"/></svg>{}{kinds}</li>",
            group.fill, group.name
        );
    }
    for (class, name) in [("p50", "latency p50"), ("p99", "latency p99")] {
        let _ = write!(
            page,
            "<li><svg width=\"24\" height=\"14\" aria-hidden=\"true\"><path class=\"{class}\" \
             d=\"M0,7h24\"/></svg>{name}</li>"
        );
    }
    page.push_str("</ul>");
}

/// `n` calls, in words.
fn calls(n: u64) -> String {
    match n {
        1 => "1 call".to_string(),
        n => format!("{n} calls"),
    }
}

/// What the bars' height measures.
fn unit(window: Window) -> &'static str {
    match window.bucket_minutes() {
        1 => "calls/min",
        _ => "calls/min (15-minute bars)",
    }
}

/// The calls of `group` in `tally`.
fn count(tally: &Tally, group: &Group) -> u64 {
    group.outcomes.iter().map(|o| tally.count(*o)).sum()
}

/// A round number at or above `value` (1, 2 or 5 times a power of ten): the top of a y axis.
fn nice_max(value: f64) -> f64 {
    if value.is_nan() || value <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|top| *top >= value)
        .unwrap_or(10.0 * power)
}

/// A number for an axis or a rate, without needless decimals.
fn short(value: f64) -> String {
    let text = match value {
        v if v >= 100.0 => format!("{v:.0}"),
        v if v >= 10.0 => format!("{v:.1}"),
        v if v >= 0.1 => format!("{v:.2}"),
        v => format!("{v:.3}"),
    };
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

/// Milliseconds as shown; `–` for none.
fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), short)
}

/// The `HH:MM` of an RFC 3339 instant.
fn hh_mm(utc: &str) -> &str {
    utc.get(11..16).unwrap_or(utc)
}

/// An instant shown as a time of day (a weekday too over 24 hours) in the browser's zone.
fn short_time(utc: &str, window: Window) -> String {
    let form = match window {
        Window::Day => "dhm",
        _ => "hm",
    };
    let utc = escape(utc);
    format!(
        "<time class=\"{form}\" datetime=\"{utc}\" title=\"{utc} UTC\">{} UTC</time>",
        hh_mm(&utc)
    )
}

/// The window's totals, one row per series: the counts of every outcome (in the legend's order)
/// and the latencies, exact in `data-ms` (Rust's shortest form of the number, empty for none).
fn totals(page: &mut String, window: Window, kind: &str, rows: &[(&Series, &str)]) {
    let _ = write!(
        page,
        "<div class=\"scroll\"><table class=\"totals\" data-series=\"{kind}\"><thead><tr><th>{kind}</th>"
    );
    if kind == "tool" {
        page.push_str("<th>upstream</th>");
    }
    page.push_str("<th>state</th><th class=\"num\">calls</th><th class=\"num\">calls/min</th>");
    // The long names may break after their underscore: the table then fits a laptop's width.
    for outcome in GROUPS.iter().flat_map(|g| g.outcomes) {
        let name = outcome.as_str().replace('_', "_<wbr>");
        let _ = write!(page, "<th class=\"num\">{name}</th>");
    }
    page.push_str("<th class=\"num\">p50 ms</th><th class=\"num\">p99 ms</th></tr></thead><tbody>");
    for (series, state) in rows {
        let name = escape(&series.name);
        let upstream = series.upstream.as_deref().map(escape);
        let _ = write!(page, "<tr data-series=\"{kind}\" data-name=\"{name}\"");
        if let Some(upstream) = &upstream {
            let _ = write!(page, " data-upstream=\"{upstream}\"");
        }
        let _ = write!(page, "><td>{name}</td>");
        if kind == "tool" {
            match &upstream {
                Some(upstream) => {
                    let _ = write!(page, "<td>{upstream}</td>");
                }
                None => page.push_str("<td class=\"empty\">none</td>"),
            }
        }
        let calls = series.total.calls();
        let _ = write!(
            page,
            "<td class=\"{}\">{state}</td><td class=\"num\">{calls}</td>\
             <td class=\"num\">{}</td>",
            class(state),
            short(calls as f64 / window.minutes() as f64),
        );
        for outcome in GROUPS.iter().flat_map(|g| g.outcomes) {
            let n = series.total.count(*outcome);
            let class = if n == 0 { "z" } else { outcome.as_str() };
            let _ = write!(page, "<td class=\"num {class}\">{n}</td>");
        }
        for value in [series.total.p50(), series.total.p99()] {
            let exact = value.map(|v| v.to_string()).unwrap_or_default();
            let _ = write!(
                page,
                "<td class=\"num\" data-ms=\"{exact}\">{}</td>",
                ms(value)
            );
        }
        page.push_str("</tr>");
    }
    if rows.is_empty() {
        let columns = if kind == "tool" { 16 } else { 15 };
        let _ = write!(
            page,
            "<tr><td colspan=\"{columns}\" class=\"empty\">no calls in this window</td></tr>"
        );
    }
    page.push_str("</tbody></table></div>");
}

#[cfg(test)]
mod tests;
