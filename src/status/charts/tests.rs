use super::*;

const HOSTILE: &str = "<img src=x onerror=alert(1)>";

type Bar<'a> = (usize, &'a [(Outcome, f64)]);

/// A series of `window` whose bar `index` holds the calls given (outcome, milliseconds).
fn series(name: &str, upstream: Option<&str>, window: Window, bars: &[Bar]) -> Series {
    let mut buckets = vec![Tally::default(); window.buckets()];
    let mut total = Tally::default();
    for (index, calls) in bars {
        for (outcome, ms) in calls.iter() {
            buckets[*index].add(*outcome, *ms);
            total.add(*outcome, *ms);
        }
    }
    Series {
        name: name.to_string(),
        upstream: upstream.map(str::to_string),
        buckets,
        total,
    }
}

fn traffic(window: Window, upstreams: Vec<Series>, tools: Vec<Series>) -> Traffic {
    Traffic {
        window,
        // 2025-01-01T10:00Z
        first_minute: 28_928_760,
        upstreams,
        tools,
        missing_before: None,
    }
}

fn render(traffic: Result<Traffic, String>, upstreams: Vec<(&str, &str)>) -> String {
    let window = traffic.as_ref().map(|t| t.window).unwrap_or(Window::Hour);
    let mut page = String::new();
    section(
        &mut page,
        &Panel {
            window,
            traffic: &traffic,
            upstreams,
            tools: BTreeMap::from([("echo", "enabled")]),
            others: "caller=a+b%26c",
        },
    );
    page
}

/// The `<tr>` of the totals whose `data-name` is `name` (escaped).
fn totals_row<'a>(page: &'a str, name: &str) -> &'a str {
    let start = page
        .find(&format!("<tr data-series=\"tool\" data-name=\"{name}\""))
        .unwrap_or_else(|| panic!("no totals row for {name}: {page}"));
    let row = &page[start..];
    &row[..row.find("</tr>").expect("row end")]
}

/// Proves: a bar's stacked segments are as high as its calls on a scale whose top is a round
/// number at or above the busiest minute (4 ok and 1 denied at a top of 5 calls/min: 77 and 19
/// units of 96), and the hover text says the minute, the calls of each group with their
/// outcomes, and the latencies; the totals row has every outcome's count and the exact
/// latencies in `data-ms`.
#[test]
fn bars_and_their_titles_reflect_the_tallies() {
    let ok = (Outcome::Ok, 2.0);
    let echo = series(
        "echo",
        Some("demo"),
        Window::Hour,
        &[
            (3, &[ok, ok, ok, ok, (Outcome::Denied, 0.1)]),
            (5, &[(Outcome::Timeout, 30.0)]),
        ],
    );
    let (p50, p99) = (echo.buckets[3].p50(), echo.buckets[3].p99());
    let total = echo.total.clone();
    let page = render(
        Ok(traffic(Window::Hour, vec![], vec![echo])),
        vec![("demo", "up")],
    );
    // Bar 3 starts at x = 44 + 3·8 and is 7 wide; 4 calls of a 5-call top are 77 units high.
    assert!(
        page.contains("<path fill=\"#2e8540\" d=\"M68,41h7v77h-7z\"/>"),
        "{page}"
    );
    assert!(
        page.contains("<path fill=\"url(#tg-refused)\" d=\"M68,22h7v19h-7z\"/>"),
        "{page}"
    );
    assert!(
        page.contains("<path fill=\"url(#tg-errors)\" d=\"M84,99h7v19h-7z\"/>"),
        "{page}"
    );
    assert!(
        !page.contains("url(#tg-unknown)\" d="),
        "no unknown calls, no path"
    );
    assert!(
        page.contains("class=\"y\">5</text>"),
        "the axis top: {page}"
    );
    assert!(page.contains(">calls/min</text>"), "{page}");
    let title = format!(
        "<title data-at=\"2025-01-01T10:03:00.000Z\">10:03 UTC — 5 calls; ok 4; \
         refused 1 (denied 1); p50 {} ms, p99 {} ms</title>",
        ms(p50),
        ms(p99)
    );
    assert!(page.contains(&title), "{title} in {page}");
    assert!(
        page.contains("10:05 UTC — 1 call; errors 1 (timeout 1); p50 "),
        "{page}"
    );
    assert_eq!(
        page.matches("<rect class=\"hit\"").count(),
        2,
        "a hover area per bar with calls"
    );
    assert!(page.contains(
        "role=\"img\" aria-label=\"echo: 6 calls in the last hour: 4 ok, 1 refused, 1 errors, \
         0 unknown; at most 5 calls a minute;"
    ));
    // The numbers: a column per outcome (the refusal's kind, not only its group)...
    assert!(
        page.contains(
            "<th class=\"num\">ok</th><th class=\"num\">denied</th>\
                       <th class=\"num\">rejected_<wbr>input</th>"
        ),
        "{page}"
    );
    // ... one row per bar with calls, its time in a <time> the script localises.
    assert!(page.contains(
        "<tr><td><time class=\"hm\" datetime=\"2025-01-01T10:03:00.000Z\" \
         title=\"2025-01-01T10:03:00.000Z UTC\">10:03 UTC</time></td><td class=\"num\">5</td>\
         <td class=\"num\">4</td><td class=\"num\">1</td><td class=\"num\">0</td>"
    ));
    let row = totals_row(&page, "echo");
    assert!(row.contains("data-upstream=\"demo\""), "{row}");
    assert!(
        row.contains("<td class=\"enabled\">enabled</td><td class=\"num\">6</td>"),
        "{row}"
    );
    assert!(
        row.contains("<td class=\"num ok\">4</td><td class=\"num denied\">1</td>"),
        "{row}"
    );
    assert!(row.contains("<td class=\"num z\">0</td>"), "{row}");
    let exact = |v: Option<f64>| {
        format!(
            "data-ms=\"{}\"",
            v.map(|v| v.to_string()).unwrap_or_default()
        )
    };
    assert!(
        row.contains(&exact(total.p50())) && row.contains(&exact(total.p99())),
        "{row}"
    );
}

/// Proves: names from outside (a tool name a client made up, an upstream's) appear only escaped,
/// in the chart's caption and label, the totals' `data-name` and cells; a tool without a
/// contract is listed with no upstream and the state `no contract`.
#[test]
fn hostile_names_are_escaped_everywhere() {
    let made_up = series(
        HOSTILE,
        None,
        Window::Hour,
        &[(59, &[(Outcome::Denied, 0.1)])],
    );
    let upstream = series(
        "\"up\"<b>",
        None,
        Window::Hour,
        &[(0, &[(Outcome::Ok, 1.0)])],
    );
    let page = render(
        Ok(traffic(Window::Hour, vec![upstream], vec![made_up])),
        vec![],
    );
    assert!(
        !page.contains("<img") && !page.contains("\"up\"") && !page.contains("up&quot;<b>"),
        "markup from a name"
    );
    let escaped = "&lt;img src=x onerror=alert(1)&gt;";
    assert!(page.contains(&format!(
        "<figure class=\"chart\" data-series=\"tool\" data-name=\"{escaped}\">"
    )));
    assert!(page.contains(&format!("aria-label=\"{escaped}: 1 call in")));
    let row = totals_row(&page, escaped);
    assert!(!row.contains("data-upstream"), "{row}");
    assert!(
        row.contains("<td class=\"empty\">none</td><td class=\"no-contract\">no contract</td>")
    );
    // Only refused calls: no latency to draw, and none in the totals.
    assert!(page.contains("no call sent upstream"));
    assert!(
        row.ends_with("<td class=\"num\" data-ms=\"\">–</td>"),
        "{row}"
    );
    // An upstream the configuration no longer has, still shown with its calls.
    assert!(
        page.contains("data-name=\"&quot;up&quot;&lt;b&gt;\""),
        "{page}"
    );
    assert!(page.contains("<td class=\"not-configured\">not configured</td>"));
}

/// Proves: a window without calls says so for every configured upstream and for the tools, draws
/// no chart, and still offers the window links (keeping the other filters, the current window
/// marked) and the upstreams' totals, all zero.
#[test]
fn an_empty_window_says_there_were_no_calls() {
    let page = render(
        Ok(traffic(Window::FifteenMinutes, vec![], vec![])),
        vec![("demo", "down")],
    );
    assert!(!page.contains("<svg class=\"traffic\""), "{page}");
    assert_eq!(page.matches("no calls in this window").count(), 3, "{page}");
    assert!(page.contains("<span class=\"down\">down</span>"), "{page}");
    assert!(page.contains(
        "<a href=\"/status?caller=a+b%26c&amp;window=15m\" aria-current=\"page\">last 15 minutes</a>"
    ));
    assert!(page.contains("<a href=\"/status?caller=a+b%26c&amp;window=1h\">last hour</a>"));
    assert!(page.contains(
        "<tr data-series=\"upstream\" data-name=\"demo\"><td>demo</td>\
                           <td class=\"down\">down</td><td class=\"num\">0</td>"
    ));
}

/// Proves: over 24 hours, with 15-minute bars, heights are calls per minute (30 calls in a bar
/// are 2 calls/min, the axis's top), the axis says so, and each hover text gives the rate.
#[test]
fn a_day_divides_bars_by_fifteen() {
    let calls = [(Outcome::Ok, 1.0); 30];
    let echo = series("echo", Some("demo"), Window::Day, &[(95, &calls)]);
    let page = render(Ok(traffic(Window::Day, vec![], vec![echo])), vec![]);
    // Bar 95 of 96: 5 units wide at x = 44 + 95·5, full height.
    assert!(page.contains("d=\"M519,22h4v96h-4z\""), "{page}");
    assert!(page.contains("class=\"y\">2</text>"), "{page}");
    assert!(
        page.contains(">calls/min (15-minute bars)</text>"),
        "{page}"
    );
    assert!(page.contains("— 30 calls (2/min); ok 30;"), "{page}");
    assert!(page.contains("<time class=\"dhm\""), "weekdays over a day");
    // The totals' rate is over the whole day.
    assert!(
        totals_row(&page, "echo").contains("<td class=\"num\">30</td><td class=\"num\">0.021</td>")
    );
}

/// Proves: the twelve most called tools get charts, the others are in the totals only with a
/// line saying so; minutes not summarised yet are announced; an unreadable store is an error
/// line, the window links still there.
#[test]
fn charts_are_capped_and_gaps_and_errors_are_said() {
    let tools = (0..14)
        .map(|i| {
            series(
                &format!("t{i}"),
                Some("demo"),
                Window::Hour,
                &[(1, &[(Outcome::Ok, 1.0)])],
            )
        })
        .collect();
    let mut t = traffic(Window::Hour, vec![], tools);
    t.missing_before = Some(t.first_minute + 5);
    let page = render(Ok(t), vec![]);
    assert_eq!(
        page.matches("<figure class=\"chart\" data-series=\"tool\"")
            .count(),
        CHARTED_TOOLS
    );
    assert_eq!(page.matches("<tr data-series=\"tool\"").count(), 14);
    assert!(page.contains("2 more tools had calls: they are in the totals below only."));
    assert!(
        page.contains("Charts before <time datetime=\"2025-01-01T10:05:00.000Z\""),
        "{page}"
    );
    let page = render(Err("disk <on> fire".into()), vec![]);
    assert!(page.contains("the traffic cannot be read: disk &lt;on&gt; fire"));
    assert!(page.contains("aria-current=\"page\">last hour</a>"));
}

/// Proves: round axis tops, and short numbers without needless decimals.
#[test]
fn axis_tops_are_round_numbers() {
    let tops: Vec<f64> = [0.0, 0.13, 1.0, 3.0, 7.0, 12.0, 999.0]
        .map(nice_max)
        .to_vec();
    assert_eq!(tops, [1.0, 0.2, 1.0, 5.0, 10.0, 20.0, 1000.0]);
    assert_eq!(
        [0.0007, 0.5, 2.0, 2.153, 12.25, 215.3].map(short),
        ["0.001", "0.5", "2", "2.15", "12.2", "215"]
    );
}
