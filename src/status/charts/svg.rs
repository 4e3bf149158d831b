//! One chart of the traffic panel: a series' calls per minute as bars stacked by outcome group,
//! its latency p50 and p99 under them, a hover text per bar, and the bars' numbers in a table.

use std::fmt::Write as _;

use super::{GROUPS, calls, class, count, hh_mm, ms, nice_max, short, short_time, span, unit};
use crate::receipts::format_utc_millis;
use crate::receipts::traffic::{Series, Tally, Traffic, Window};
use crate::status::html::escape;

// The chart's geometry, in SVG user units: 480 is divisible by every window's number of bars
// (15, 60, 96), so bars have integer widths.
const LEFT: i64 = 44;
const PLOT_W: i64 = 480;
const WIDTH: i64 = LEFT + PLOT_W + 40;
const BARS_TOP: i64 = 22;
const BARS_H: i64 = 96;
const BARS_BASE: i64 = BARS_TOP + BARS_H;
const LAT_TOP: i64 = 148;
const LAT_H: i64 = 48;
const LAT_BASE: i64 = LAT_TOP + LAT_H;
const HEIGHT: i64 = LAT_BASE + 6;

/// One series' chart: bars of calls per minute stacked by outcome group, under them the latency
/// lines, then the numbers.
pub(super) fn chart(
    page: &mut String,
    traffic: &Traffic,
    kind: &str,
    series: &Series,
    state: &str,
) {
    let window = traffic.window;
    let name = escape(&series.name);
    let total = &series.total;
    let _ = write!(
        page,
        "<figure class=\"chart\" data-series=\"{kind}\" data-name=\"{name}\"><figcaption>\
         <b>{name}</b> <span class=\"{}\">{state}</span>",
        class(state),
    );
    if total.calls() == 0 || series.buckets.is_empty() {
        page.push_str("</figcaption><p class=\"empty\">no calls in this window</p></figure>");
        return;
    }
    let _ = write!(
        page,
        " <span class=\"sum\">{} · p50 {} ms · p99 {} ms</span></figcaption>",
        calls(total.calls()),
        ms(total.p50()),
        ms(total.p99()),
    );
    let per_minute = window.bucket_minutes() as f64;
    let peak = series
        .buckets
        .iter()
        .map(|t| t.calls() as f64 / per_minute)
        .fold(0.0, f64::max);
    let top = nice_max(peak);
    let slowest = series
        .buckets
        .iter()
        .filter_map(Tally::p99)
        .fold(0.0, f64::max);
    let lat_top = nice_max(slowest);
    let groups: Vec<String> = GROUPS
        .iter()
        .map(|g| format!("{} {}", count(total, g), g.name))
        .collect();
    let _ = write!(
        page,
        "<svg class=\"traffic\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{name}: \
         {} in the last {}: {}; at most {} calls a minute; latency p50 {} ms, p99 {} ms\">\
         <path class=\"grid\" d=\"M{LEFT},{BARS_TOP}h{PLOT_W}M{LEFT},{}h{PLOT_W}M{LEFT},{LAT_TOP}h{PLOT_W}\"/>\
         <path class=\"axis\" d=\"M{LEFT},{BARS_BASE}h{PLOT_W}M{LEFT},{LAT_BASE}h{PLOT_W}\"/>\
         <text x=\"{LEFT}\" y=\"14\">{}</text><text x=\"{}\" y=\"{}\" class=\"y\">{}</text>\
         <text x=\"{}\" y=\"{}\" class=\"y\">0</text><text x=\"{LEFT}\" y=\"{}\">latency, ms</text>\
         <text x=\"{}\" y=\"{}\" class=\"y\">{}</text><text x=\"{}\" y=\"{}\" class=\"y\">0</text>",
        calls(total.calls()),
        span(window),
        groups.join(", "),
        short(peak),
        ms(total.p50()),
        ms(total.p99()),
        BARS_TOP + BARS_H / 2,
        unit(window),
        LEFT - 5,
        BARS_TOP + 5,
        short(top),
        LEFT - 5,
        BARS_BASE + 5,
        LAT_TOP - 8,
        LEFT - 5,
        LAT_TOP + 5,
        short(lat_top),
        LEFT - 5,
        LAT_BASE + 5,
    );
    bars(page, series, window, top);
    latency(page, series, window, lat_top);
    hover(page, traffic, series);
    page.push_str("</svg>");
    let end = traffic.bucket_start_millis(series.buckets.len());
    let _ = write!(
        page,
        "<div class=\"axis\">{}{}</div>",
        short_time(&format_utc_millis(traffic.bucket_start_millis(0)), window),
        short_time(&format_utc_millis(end), window),
    );
    numbers(page, traffic, series);
    page.push_str("</figure>");
}

/// Bar `index`'s left edge and width: bars with a gap between them.
fn bar_x(window: Window, index: usize) -> (i64, i64) {
    let step = PLOT_W / i64::try_from(window.buckets().max(1)).unwrap_or(1);
    let gap = match step {
        s if s >= 16 => 4,
        s if s >= 4 => 1,
        _ => 0,
    };
    (LEFT + index as i64 * step + gap / 2, step - gap)
}

/// The stacked bars: one path per outcome group. A group with calls is at least one unit high.
fn bars(page: &mut String, series: &Series, window: Window, top: f64) {
    let units_per_call = BARS_H as f64 / (top * window.bucket_minutes() as f64);
    let mut paths = vec![String::new(); GROUPS.len()];
    for (index, tally) in series.buckets.iter().enumerate() {
        let (x, w) = bar_x(window, index);
        let (mut calls, mut drawn) = (0, 0);
        for (group, path) in GROUPS.iter().zip(paths.iter_mut()) {
            let n = count(tally, group);
            if n == 0 {
                continue;
            }
            calls += n;
            let height = ((calls as f64 * units_per_call).round() as i64)
                .max(drawn + 1)
                .min(BARS_H);
            let _ = write!(
                path,
                "M{x},{}h{w}v{}h-{w}z",
                BARS_BASE - height,
                height - drawn
            );
            drawn = height;
        }
    }
    for (group, path) in GROUPS.iter().zip(&paths) {
        if !path.is_empty() {
            let _ = write!(page, "<path fill=\"{}\" d=\"{path}\"/>", group.fill);
        }
    }
}

/// The p50 and p99 lines over the bars' centres, broken where no call was sent upstream; a
/// lone point is a short dash. Each line is labelled at its last point.
fn latency(page: &mut String, series: &Series, window: Window, top: f64) {
    let points = |quantile: fn(&Tally) -> Option<f64>| -> Vec<Option<(i64, i64)>> {
        series
            .buckets
            .iter()
            .enumerate()
            .map(|(index, tally)| {
                let (x, w) = bar_x(window, index);
                quantile(tally).map(|ms| {
                    let y = LAT_BASE - ((ms / top) * LAT_H as f64).round() as i64;
                    (x + w / 2, y.clamp(LAT_TOP, LAT_BASE))
                })
            })
            .collect()
    };
    let p50 = points(Tally::p50);
    let p99 = points(Tally::p99);
    if p50.iter().all(Option::is_none) {
        let _ = write!(
            page,
            "<text x=\"{}\" y=\"{}\" class=\"none\">no call sent upstream</text>",
            LEFT + PLOT_W / 2,
            LAT_TOP + LAT_H / 2 + 5
        );
        return;
    }
    let last = |line: &[Option<(i64, i64)>]| line.iter().rev().find_map(|p| *p);
    let (y50, y99) = (last(&p50).map(|p| p.1), last(&p99).map(|p| p.1));
    for (class, line) in [("p50", &p50), ("p99", &p99)] {
        let _ = write!(page, "<path class=\"{class}\" d=\"{}\"/>", line_path(line));
    }
    // The labels apart, however close the lines end.
    if let (Some(y50), Some(y99)) = (y50, y99) {
        let y99 = y99.min(y50 - 16);
        let _ = write!(
            page,
            "<text x=\"{x}\" y=\"{}\" class=\"lbl\">p99</text>\
             <text x=\"{x}\" y=\"{}\" class=\"lbl\">p50</text>",
            y99 + 5,
            y50 + 5,
            x = LEFT + PLOT_W + 6,
        );
    }
}

fn line_path(line: &[Option<(i64, i64)>]) -> String {
    let mut d = String::new();
    for (index, point) in line.iter().enumerate() {
        let Some((x, y)) = point else { continue };
        let joined = index > 0 && line[index - 1].is_some();
        let alone = !joined && line.get(index + 1).is_none_or(Option::is_none);
        let _ = match (joined, alone) {
            (true, _) => write!(d, "L{x},{y}"),
            (false, true) => write!(d, "M{},{y}h6", x - 3),
            (false, false) => write!(d, "M{x},{y}"),
        };
    }
    d
}

/// A hover area over each bar with calls: its numbers in a `<title>`. The time leads, in UTC;
/// the page's script shows it in the browser's zone.
fn hover(page: &mut String, traffic: &Traffic, series: &Series) {
    for (index, tally) in series.buckets.iter().enumerate() {
        if tally.calls() == 0 {
            continue;
        }
        let (x, w) = bar_x(traffic.window, index);
        let utc = format_utc_millis(traffic.bucket_start_millis(index));
        let _ = write!(
            page,
            "<rect class=\"hit\" x=\"{x}\" y=\"{BARS_TOP}\" width=\"{w}\" height=\"{}\">\
             <title data-at=\"{utc}\">{} UTC — {}</title></rect>",
            LAT_BASE - BARS_TOP,
            hh_mm(&utc),
            bar_text(tally, traffic.window),
        );
    }
}

/// A bar's numbers in words: calls and rate, each group with its outcomes, the latencies.
fn bar_text(tally: &Tally, window: Window) -> String {
    let mut text = calls(tally.calls());
    if window.bucket_minutes() > 1 {
        let rate = tally.calls() as f64 / window.bucket_minutes() as f64;
        let _ = write!(text, " ({}/min)", short(rate));
    }
    for group in &GROUPS {
        let n = count(tally, group);
        if n == 0 {
            continue;
        }
        let _ = write!(text, "; {} {n}", group.name);
        let kinds: Vec<String> = group
            .outcomes
            .iter()
            .filter(|o| group.outcomes.len() > 1 && tally.count(**o) > 0)
            .map(|o| format!("{o} {}", tally.count(*o)))
            .collect();
        if !kinds.is_empty() {
            let _ = write!(text, " ({})", kinds.join(", "));
        }
    }
    let _ = write!(
        text,
        "; p50 {} ms, p99 {} ms",
        ms(tally.p50()),
        ms(tally.p99())
    );
    text
}

/// The chart's numbers, for screen readers and for copying: one row per bar with calls, a
/// column per outcome.
fn numbers(page: &mut String, traffic: &Traffic, series: &Series) {
    page.push_str(
        "<details><summary>numbers</summary><table><thead><tr><th>from</th>\
         <th class=\"num\">calls</th>",
    );
    // Every outcome, in the legend's group order: the chart draws the groups, the table says
    // which refusal or error each call was.
    for outcome in GROUPS.iter().flat_map(|g| g.outcomes) {
        let _ = write!(
            page,
            "<th class=\"num\">{}</th>",
            outcome.as_str().replace('_', "_<wbr>")
        );
    }
    page.push_str("<th class=\"num\">p50 ms</th><th class=\"num\">p99 ms</th></tr></thead><tbody>");
    for (index, tally) in series.buckets.iter().enumerate() {
        if tally.calls() == 0 {
            continue;
        }
        let utc = format_utc_millis(traffic.bucket_start_millis(index));
        let _ = write!(
            page,
            "<tr><td>{}</td><td class=\"num\">{}</td>",
            short_time(&utc, traffic.window),
            tally.calls()
        );
        for outcome in GROUPS.iter().flat_map(|g| g.outcomes) {
            let _ = write!(page, "<td class=\"num\">{}</td>", tally.count(*outcome));
        }
        let _ = write!(
            page,
            "<td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            ms(tally.p50()),
            ms(tally.p99())
        );
    }
    page.push_str(
        "</tbody></table><p class=\"note\">Bars without calls are left out.</p></details>",
    );
}
