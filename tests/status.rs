//! The status page (`GET /status`) against the real binary and the demo upstream over stdio: who
//! may see it (401 with a Basic challenge, 403, 200), each panel, escaping of values from outside,
//! the receipts filters, the traffic charts' windows and totals (held to `narrowgate receipts
//! --summary`), the same-origin guard on requests that change something, and the page in
//! headless Chromium (Debian's `chromium`), with no console errors and a screenshot kept under
//! `target/tmp/status-page/`.

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{BOB, Gateway, KEY, call, client, demo_stdio_config, hash_key};
use serde_json::{Value, json};

/// A caller name an operator could write, that means markup in HTML.
const HOSTILE_CALLER: &str = "<i>bob</i>";
/// A tool name a client can send (it is denied, and its receipt keeps it).
const HOSTILE_TOOL: &str = "<img src=x onerror=alert(1)>";
const ANONYMOUS_ADMIN: &str =
    "  - name: anyone\n    anonymous: true\n    tools: [echo]\n    roles: [admin]\n";

/// alice (key [`KEY`]) has the `admin` role; `<i>bob</i>` (key [`BOB`]) none; an anonymous
/// caller has `admin` too (and still may not see the page). `echo` allows one call a minute
/// per caller; `missing` names no upstream tool (disabled, with a reason).
fn start() -> Gateway {
    start_with("")
}

/// [`start`] with `extra` configuration (a `receipts:` block, say).
fn start_with(extra: &str) -> Gateway {
    let callers = format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n    roles: [admin]\n\
         \x20 - name: '{HOSTILE_CALLER}'\n    api_key_sha256: {}\n    tools: [echo]\n{ANONYMOUS_ADMIN}",
        hash_key(KEY),
        hash_key(BOB),
    );
    let contract = "upstream: demo\ntools:\n  echo:\n    privilege: read\n    rate: 1/m\n    input:\n\
                    \x20     type: object\n      properties: { message: { type: string } }\n\
                    \x20     required: [message]\n  missing:\n    privilege: read\n";
    Gateway::start(
        &demo_stdio_config(&callers, extra),
        &[("demo.yaml", contract)],
    )
}

/// Receipts of every kind the page shows: alice's echo (ok), then rate_limited; the hostile
/// caller's echo (ok); a denied call of the hostile tool name.
async fn make_receipts(gw: &Gateway) {
    let alice = client(&gw.url, KEY).await;
    for _ in 0..2 {
        let _ = call(&alice, "echo", json!({"message": "hi"})).await;
    }
    let _ = call(&alice, HOSTILE_TOOL, json!({})).await;
    let bob = client(&gw.url, BOB).await;
    let _ = call(&bob, "echo", json!({"message": "hi"})).await;
    let _ = alice.cancel().await;
    let _ = bob.cancel().await;
}

async fn get(gw: &Gateway, path_and_query: &str, auth: Auth) -> reqwest::Response {
    let request = reqwest::Client::new().get(format!("{}{path_and_query}", gw.base));
    let request = match auth {
        Auth::None => request,
        Auth::Basic(key) => request.basic_auth("whoever", Some(key)),
        Auth::Bearer(key) => request.bearer_auth(key),
    };
    request.send().await.expect("GET /status")
}

#[derive(Clone, Copy)]
enum Auth {
    None,
    Basic(&'static str),
    Bearer(&'static str),
}

async fn page(gw: &Gateway, path_and_query: &str) -> String {
    let response = get(gw, path_and_query, Auth::Basic(KEY)).await;
    assert_eq!(response.status(), 200, "{path_and_query}");
    response.text().await.expect("page")
}

/// The text of each cell of each body row of the section `id` (tags stripped, entities kept).
fn rows(page: &str, id: &str) -> Vec<Vec<String>> {
    let start = page
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id} in {page}"));
    let section = &page[start..];
    let section = &section[..section.find("</section>").expect("section end")];
    let Some(body) = section.split_once("<tbody>").map(|(_, b)| b) else {
        return vec![];
    };
    body.split("<tr")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let inner = cell.split_once('>').map(|(_, c)| c).unwrap_or("");
                    strip_tags(inner.split("</td>").next().unwrap_or(""))
                })
                .collect()
        })
        .filter(|cells: &Vec<String>| !cells.iter().any(|c| c.contains("match")))
        .collect()
}

fn strip_tags(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// Proves: without credentials (even with an anonymous caller holding `admin`) and with wrong
/// ones the page answers 401 with a Basic challenge, so browsers ask; a caller without the
/// `admin` role gets 403 (Basic or Bearer); alice, with it, gets the page by either, under a
/// Content-Security-Policy that allows no external assets.
#[tokio::test]
async fn only_admins_see_the_page() {
    let gw = start();
    for auth in [
        Auth::None,
        Auth::Basic("wrong-key"),
        Auth::Bearer("wrong-key"),
    ] {
        let response = get(&gw, "/status", auth).await;
        assert_eq!(response.status(), 401);
        let challenges: Vec<_> = response
            .headers()
            .get_all("www-authenticate")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert!(
            challenges.iter().any(|c| c.starts_with("Basic realm=")),
            "{challenges:?}"
        );
    }
    for auth in [Auth::Basic(BOB), Auth::Bearer(BOB)] {
        assert_eq!(get(&gw, "/status", auth).await.status(), 403);
    }
    for auth in [Auth::Basic(KEY), Auth::Bearer(KEY)] {
        let response = get(&gw, "/status", auth).await;
        assert_eq!(response.status(), 200);
        let csp = response
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert!(csp.starts_with("default-src 'none'"), "{csp}");
        let text = response.text().await.expect("page");
        assert!(text.contains("Signed in as <b id=\"caller\">alice</b>"));
        assert!(!text.contains("src=\"http") && !text.contains("href=\"http"));
    }
}

/// Proves: each panel is there with what it shows (the upstream up, `echo` enabled with its
/// verdict, `missing` disabled with its reason, receipts, the rate-limit refusal, approvals not
/// configured), the page is small, and names from outside (a caller name and a requested tool name holding markup)
/// appear escaped, never as markup.
#[tokio::test]
async fn every_panel_is_present_and_values_are_escaped() {
    let gw = start();
    make_receipts(&gw).await;
    let text = page(&gw, "/status").await;
    assert_eq!(
        rows(&text, "upstreams"),
        vec![vec![
            "demo",
            "up",
            rows(&text, "upstreams")[0][2].as_str(),
            ""
        ]]
    );
    let tools = rows(&text, "tools");
    assert_eq!(
        tools[0][..4],
        ["echo", "demo", "enabled", "input: proven narrower"]
    );
    assert_eq!(tools[1][..3], ["missing", "demo", "disabled"]);
    assert!(tools[1][4].contains("has no tool `missing`"), "{tools:?}");
    let receipts = rows(&text, "receipts");
    assert_eq!(receipts.len(), 4, "{receipts:?}");
    let refused = rows(&text, "rate-limited");
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0][1..4], ["alice", "echo", "rate_limited"]);
    assert!(text.contains("approvals are not configured on this gateway"));
    // Escaped, never markup: the hostile names are in the page only as text.
    assert!(text.contains("&lt;i&gt;bob&lt;/i&gt;"), "{text}");
    assert!(
        text.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{text}"
    );
    assert!(
        !text.contains(HOSTILE_CALLER) && !text.contains("<img"),
        "{text}"
    );
    // One script element: the page's own.
    assert_eq!(text.matches("<script").count(), 1);
    // Small: style and script inline, four receipts (about 7 KB; 50 receipts make about 16 KB),
    // and the traffic panel: three charts (demo, echo, the hostile name) with their numbers,
    // the fill patterns, the legend, the totals and their style (about 13 KB more: 20 KB).
    assert!(text.len() < 24 * 1024, "{} bytes", text.len());
}

/// The totals rows of the traffic panel (`<tr data-series=…>` of its `table.totals`), as
/// `narrowgate receipts --summary --json` writes its entries: (upstreams, tools).
fn totals(page: &str) -> (Vec<Value>, Vec<Value>) {
    let start = page
        .find("<section id=\"traffic\">")
        .expect("the traffic section");
    let section = &page[start..];
    let section = &section[..section.find("</section>").expect("section end")];
    let attribute = |tag: &str, name: &str| {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(unescape(&tag[at..at + tag[at..].find('"')?]))
    };
    let (mut upstreams, mut tools) = (vec![], vec![]);
    for table in section.split("<table class=\"totals\"").skip(1) {
        let table = &table[..table.find("</table>").expect("table end")];
        let (head, body) = table.split_once("<tbody>").expect("a body");
        let heads: Vec<String> = head
            .split("<th")
            .skip(2) // `<thead>`, then the headers
            .map(|h| strip_tags(h.split_once('>').map_or("", |(_, t)| t)))
            .collect();
        for row in body.split("<tr ").skip(1) {
            let tag = &format!(" {}", &row[..row.find('>').expect("tag end")]);
            let cells: Vec<(&str, String)> = row
                .split("<td")
                .skip(1)
                .map(|cell| {
                    let (tag, rest) = cell.split_once('>').unwrap_or(("", ""));
                    (tag, strip_tags(rest.split("</td>").next().unwrap_or("")))
                })
                .collect();
            let cell = |name: &str| {
                let i = heads.iter().position(|h| h == name).expect(name);
                cells[i].clone()
            };
            let count = |name: &str| json!(cell(name).1.parse::<u64>().expect(name));
            let ms = |name: &str| match attribute(cell(name).0, "data-ms").as_deref() {
                Some("") | None => Value::Null,
                Some(exact) => json!(exact.parse::<f64>().expect("data-ms")),
            };
            let outcomes: serde_json::Map<String, Value> =
                OUTCOMES.iter().map(|o| (o.to_string(), count(o))).collect();
            let mut entry = json!({
                "name": attribute(tag, "data-name").expect("data-name"),
                "calls": count("calls"),
                "outcomes": outcomes,
                "p50_ms": ms("p50 ms"),
                "p99_ms": ms("p99 ms"),
            });
            match attribute(tag, "data-series").as_deref() {
                Some("tool") => {
                    entry["upstream"] = json!(attribute(tag, "data-upstream"));
                    tools.push(entry);
                }
                _ => upstreams.push(entry),
            }
        }
    }
    (upstreams, tools)
}

const OUTCOMES: [&str; 9] = [
    "ok",
    "tool_error",
    "denied",
    "rejected_input",
    "rejected_output",
    "rate_limited",
    "timeout",
    "unknown",
    "upstream_error",
];

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// `narrowgate receipts --summary --since SINCE --json --db FILE` on the gateway's receipts:
/// (upstreams, tools), each with calls, both sorted by name.
fn summary(gw: &Gateway, since: &str) -> (Vec<Value>, Vec<Value>) {
    let db = gw.config_dir().join("data/receipts.db");
    let db = db.to_str().expect("a UTF-8 path");
    let (code, stdout, stderr) = common::receipts_command(
        &gw.config_path(),
        &["--summary", "--since", since, "--json", "--db", db],
    );
    assert_eq!(code, 0, "narrowgate receipts --summary failed: {stderr}");
    let summary: Value = serde_json::from_str(&stdout).expect("JSON");
    let list = |name: &str| sorted(summary[name].as_array().cloned().unwrap_or_default());
    (list("upstreams"), list("tools"))
}

/// Entries with calls, by name: what both the page and the command list.
fn sorted(mut entries: Vec<Value>) -> Vec<Value> {
    entries.retain(|e| e["calls"].as_u64() > Some(0));
    entries.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    entries
}

/// Proves: each window (15m, 1h, 24h) renders the traffic panel first after the header, with its
/// window marked current, the links keeping the receipts filters, and charts (role `img`, with a
/// label) for the upstream and each called tool; any other window is a 400 naming the allowed.
#[tokio::test]
async fn each_window_renders_the_traffic_panel() {
    let gw = start();
    make_receipts(&gw).await;
    for (window, words) in [("15m", "15 minutes"), ("1h", "hour"), ("24h", "24 hours")] {
        let text = page(&gw, &format!("/status?window={window}&caller=alice")).await;
        assert!(
            text.contains("</header><section id=\"traffic\"><h2>Traffic</h2>"),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "<a href=\"/status?caller=alice&amp;window={window}\" aria-current=\"page\">\
                 last {words}</a>"
            )),
            "{window}: {text}"
        );
        assert!(text.contains(&format!("<h3>Totals over the last {words}</h3>")));
        // demo, echo and the denied made-up name: each charted.
        assert_eq!(
            text.matches("role=\"img\" aria-label=").count(),
            3,
            "{window}: {text}"
        );
        assert!(
            text.contains("aria-label=\"echo: 3 calls in the last"),
            "{text}"
        );
        // The receipts filter keeps the window (the default needs no field).
        let kept = format!("<input type=\"hidden\" name=\"window\" value=\"{window}\">");
        assert_eq!(text.contains(&kept), window != "1h", "{window}");
    }
    for bad in ["bad", "1d", "60m"] {
        let refused = get(&gw, &format!("/status?window={bad}"), Auth::Basic(KEY)).await;
        assert_eq!(refused.status(), 400, "{bad}");
        let body = refused.text().await.expect("body");
        assert!(
            body.contains("`window` must be one of 15m, 1h, 24h"),
            "{body}"
        );
    }
}

/// Proves: the traffic panel's totals (each upstream's and each tool's calls, every outcome's
/// count, p50 and p99 to the last bit) are what `narrowgate receipts --summary --json` reads from
/// the raw receipts for the same window, the made-up tool name included (with no upstream), for
/// each window.
#[tokio::test]
async fn the_totals_equal_the_receipts_summary() {
    let gw = start();
    make_receipts(&gw).await;
    for (window, since) in [("15m", "15m"), ("1h", "1h"), ("24h", "24h")] {
        let (upstreams, tools) = totals(&page(&gw, &format!("/status?window={window}")).await);
        let (want_upstreams, want_tools) = summary(&gw, since);
        assert_eq!(sorted(upstreams), want_upstreams, "{window}: upstreams");
        assert_eq!(sorted(tools.clone()), want_tools, "{window}: tools");
        let echo = tools.iter().find(|t| t["name"] == "echo").expect("echo");
        assert_eq!(echo["calls"], 3, "{echo}");
        assert_eq!(echo["outcomes"]["rate_limited"], 1, "{echo}");
        assert!(echo["p50_ms"].is_f64(), "{echo}");
        let hostile = tools
            .iter()
            .find(|t| t["name"] == HOSTILE_TOOL)
            .expect("the made-up name");
        assert_eq!(hostile["upstream"], Value::Null);
        assert_eq!(hostile["outcomes"]["denied"], 1);
    }
}

/// `narrowgate receipts --summary --since SINCE --json --db DB`: (upstreams, tools) with calls,
/// by name.
fn summary_of(db: &std::path::Path, since: &str) -> (Vec<Value>, Vec<Value>) {
    let db = db.to_str().expect("a UTF-8 path");
    let out = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args([
            "receipts",
            "--summary",
            "--since",
            since,
            "--json",
            "--db",
            db,
        ])
        .output()
        .expect("run narrowgate receipts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let list = |name: &str| sorted(summary[name].as_array().cloned().unwrap_or_default());
    (list("upstreams"), list("tools"))
}

/// Three hours of receipts, one every 20 s up to 20 s ago, written straight into the database as
/// a gateway would have: `echo` of `demo` with varied outcomes and latencies, and the hostile
/// made-up name (denied, no upstream). None within two minutes of a window's edge (15 and 60
/// minutes ago), where the page's bars (whole minutes) and `--since` (to the millisecond) differ.
fn seed_past_receipts(db: &std::path::Path) {
    let connection = rusqlite::Connection::open(db).expect("the receipts database");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let outcomes = [
        "ok",
        "ok",
        "tool_error",
        "ok",
        "rate_limited",
        "timeout",
        "ok",
    ];
    for n in 1..=540_i64 {
        let millis = now - n * 20_000;
        let minutes_ago = n / 3;
        if (13..17).contains(&minutes_ago) || (58..62).contains(&minutes_ago) {
            continue;
        }
        let id = format!(
            "{:08x}-{:04x}-7000-8000-{n:012x}",
            millis >> 16,
            millis & 0xffff
        );
        let (tool, upstream, outcome) = match n % 5 {
            0 => (HOSTILE_TOOL, None, "denied"),
            _ => ("echo", Some("demo"), outcomes[(n % 7) as usize]),
        };
        connection
            .execute(
                "INSERT INTO receipts (id, time, caller, tool, upstream, arguments_digest, \
                 outcome, attempts, replayed, duration_ms) \
                 VALUES (?1, '', 'alice', ?2, ?3, '', ?4, 1, 0, ?5)",
                rusqlite::params![id, tool, upstream, outcome, (n % 40) as f64 * 2.5 + 0.4],
            )
            .expect("insert");
    }
    // As if no gateway of this version had summarised this store yet.
    connection
        .execute_batch(
            "DELETE FROM receipt_minutes_done; DELETE FROM receipt_minutes; \
             DELETE FROM receipt_quarters;",
        )
        .expect("forget the summaries");
}

/// Proves: receipts written hours before the gateway started, which its roll-up summarises when
/// it starts and the page then reads from the summaries (per minute and per quarter hour), give
/// totals equal to what `narrowgate receipts --summary` counts from the raw receipts, for each
/// window, with nothing reported missing; the day's charts hold them in quarter-hour bars.
#[tokio::test]
async fn summarised_hours_equal_the_raw_receipts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("receipts.db");
    let receipts = format!("receipts:\n  path: {}\n", db.display());
    drop(start_with(&receipts)); // creates the schema
    seed_past_receipts(&db);
    let gw = start_with(&receipts);
    let until = || -> i64 {
        rusqlite::Connection::open(&db)
            .and_then(|c| c.query_row("SELECT until FROM receipt_minutes_done", [], |r| r.get(0)))
            .unwrap_or(0)
    };
    let now_minute = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64 / 60_000)
            .unwrap_or(0)
    };
    gw.retry_until(
        Duration::from_secs(60),
        "the roll-up caught up with three hours of receipts",
        async || match until() {
            u if u >= now_minute() - 2 => Ok(()),
            u => Err(format!("until {u}, now {}", now_minute())),
        },
    )
    .await;
    let mut bars = Vec::new();
    for window in ["15m", "1h", "24h"] {
        let text = page(&gw, &format!("/status?window={window}")).await;
        assert!(!text.contains("still being summarised"), "{window}");
        let (upstreams, tools) = totals(&text);
        let (want_upstreams, want_tools) = summary_of(&db, window);
        assert!(!want_tools.is_empty(), "{window}");
        assert_eq!(sorted(upstreams), want_upstreams, "{window}: upstreams");
        assert_eq!(sorted(tools), want_tools, "{window}: tools");
        bars.push(text.matches("<rect class=\"hit\"").count());
    }
    let (_, day) = summary_of(&db, "24h");
    let echo = day.iter().find(|t| t["name"] == "echo").expect("echo");
    assert!(
        echo["calls"].as_u64() > Some(300),
        "three hours of receipts: {echo}"
    );
    // Three charts (demo, echo, the made-up name): three hours fill 12 or 13 quarter-hour bars
    // of each day's chart; demo's and echo's hour charts have calls in every minute but the
    // skipped ones (the made-up name only every 100 s).
    assert!(
        (36..=39).contains(&bars[2]),
        "15-minute bars over a day: {bars:?}"
    );
    assert!(bars[1] >= 2 * 55, "one-minute bars over an hour: {bars:?}");
}

/// Proves: the receipts panel's filters (caller, tool, outcome, limit; empty fields are no
/// filter) select the receipts `narrowgate receipts` would, and a filter that means nothing
/// is a 400 saying what is allowed.
#[tokio::test]
async fn receipt_filters_select_receipts() {
    let gw = start();
    make_receipts(&gw).await;
    let callers =
        |rows: Vec<Vec<String>>| rows.into_iter().map(|r| r[1].clone()).collect::<Vec<_>>();
    let text = page(&gw, "/status?caller=alice&tool=&outcome=").await;
    assert_eq!(
        callers(rows(&text, "receipts")),
        ["alice", "alice", "alice"]
    );
    let text = page(&gw, "/status?caller=%3Ci%3Ebob%3C%2Fi%3E").await;
    assert_eq!(rows(&text, "receipts").len(), 1);
    assert!(
        text.contains("value=\"&lt;i&gt;bob&lt;/i&gt;\""),
        "the filter is kept, escaped"
    );
    let text = page(&gw, "/status?outcome=rate_limited").await;
    let receipts = rows(&text, "receipts");
    assert_eq!(receipts.len(), 1);
    assert_eq!(receipts[0][3], "rate_limited");
    assert!(text.contains("<option selected>rate_limited</option>"));
    let text = page(&gw, "/status?tool=echo&outcome=ok").await;
    assert_eq!(
        callers(rows(&text, "receipts")),
        ["&lt;i&gt;bob&lt;/i&gt;", "alice"]
    );
    let text = page(&gw, "/status?limit=1").await;
    assert_eq!(rows(&text, "receipts").len(), 1);
    let refused = get(&gw, "/status?outcome=nope", Auth::Basic(KEY)).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.expect("body").contains("rate_limited"));
}

/// Proves: with `receipts.url`, the receipts panels read PostgreSQL (a real, private server),
/// with the same filters, through the same query code as `narrowgate receipts`.
#[tokio::test]
async fn receipts_are_read_from_postgresql_too() {
    let pg = common::Postgres::start();
    let gw = start_with(&format!("receipts:\n  url: {}\n", pg.url()));
    make_receipts(&gw).await;
    let text = page(&gw, "/status").await;
    assert_eq!(rows(&text, "receipts").len(), 4, "{text}");
    let refused = rows(&text, "rate-limited");
    assert_eq!(refused.len(), 1, "{text}");
    assert_eq!(refused[0][1..4], ["alice", "echo", "rate_limited"]);
    let text = page(&gw, "/status?caller=alice&outcome=denied").await;
    let denied = rows(&text, "receipts");
    assert_eq!(denied.len(), 1, "{text}");
    assert_eq!(denied[0][2], "&lt;img src=x onerror=alert(1)&gt;");
}

/// Proves: a request that changes something, signed in with Basic (credentials a browser sends
/// on its own), passes the browser routes' authentication only from the gateway's own origin
/// (then `/status`, GET only, answers 405); from another site, or with no Origin, it is 403.
/// With Bearer credentials (no browser sends those by itself) there is no such check.
#[tokio::test]
async fn state_changing_requests_with_basic_credentials_must_be_same_origin() {
    let gw = start();
    let post = |origin: Option<&str>, auth: Auth| {
        let mut request = reqwest::Client::new().post(format!("{}/status", gw.base));
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request = match auth {
            Auth::Basic(key) => request.basic_auth("whoever", Some(key)),
            Auth::Bearer(key) => request.bearer_auth(key),
            Auth::None => request,
        };
        async move { request.send().await.expect("POST").status().as_u16() }
    };
    let own = gw.base.clone();
    assert_eq!(post(Some(&own), Auth::Basic(KEY)).await, 405);
    assert_eq!(post(None, Auth::Basic(KEY)).await, 403);
    assert_eq!(
        post(Some("http://evil.example"), Auth::Basic(KEY)).await,
        403
    );
    assert_eq!(post(None, Auth::Bearer(KEY)).await, 405);
}

/// Chromium from the system: `NARROWGATE_CHROMIUM`, else `chromium` on the PATH (Debian's
/// package). Missing is a failure saying how to get it.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("NARROWGATE_CHROMIUM") {
        return path.into();
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
            .find(|path| path.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "headless Chromium is needed for the status page's browser test: install Debian's \
             `chromium` (apt-get install chromium; tests/run.sh does so when run as root) or set \
             NARROWGATE_CHROMIUM to a Chromium binary"
        )
    })
}

/// Where the screenshots are kept (test artefacts, under `target/`).
fn artefacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status-page");
    std::fs::create_dir_all(&dir).expect("artefact folder");
    dir
}

/// Runs tests/browser/status_page.py (DevTools protocol over a pipe) on `/status` of `gw`,
/// signing in as `key`; its JSON report.
fn drive_chromium(gw: &Gateway, key: &str, screenshot: &str, extra: &[&str]) -> Value {
    let script = common::peers::repo_root().join("tests/browser/status_page.py");
    let ran = common::process::run(
        // The driver needs only Python's standard library; the peers' Python is there anyway.
        Command::new(common::peers::py2_python())
            .arg(script)
            .arg(chromium())
            .arg(format!("{}/status", gw.base))
            .args(["whoever", key])
            .arg(artefacts().join(screenshot))
            .args(extra),
        Duration::from_secs(120),
    );
    ran.json()
}

/// Proves, in headless Chromium: the browser is asked for credentials once (the 401's Basic
/// challenge) and the page's own fetches then carry them without asking again; each panel is
/// there; the hostile caller name shows as text and makes no element; no console error,
/// exception, failed load or CSP violation happens (and the capture does catch both kinds: its
/// self-check); every header sits over its column (same alignment as its cells); every long
/// value keeps its whole text on hover; every instant is shown in the browser's zone with the
/// UTC text on hover; the traffic panel draws a chart per called series (an image with a label)
/// and its totals, read from the page as shown, equal `narrowgate receipts --summary --json`;
/// screenshots at a laptop's and a phone's width are kept under `target/tmp/status-page/`.
#[tokio::test]
async fn the_page_works_in_headless_chromium() {
    let gw = start();
    make_receipts(&gw).await;
    let report = drive_chromium(&gw, KEY, "status.png", &["--needle", HOSTILE_CALLER]);
    assert_eq!(report["auth_prompts"], 1, "{report}");
    assert_eq!(report["fetch_status"], 200, "{report}");
    assert_eq!(report["prompts_for_fetch"], 0, "{report}");
    assert_eq!(report["title"], "narrowgate status");
    for (panel, expected) in [
        ("traffic", "demo\tup\t3"),
        ("upstreams", "demo\tup"),
        ("tools", "missing\tdemo\tdisabled"),
        ("receipts", "rate_limited"),
        ("rate-limited", "alice\techo\trate_limited"),
        ("approvals", "approvals are not configured"),
    ] {
        let text = report["panels"][panel].as_str().unwrap_or_default();
        assert!(text.contains(expected), "panel {panel}: {text:?}");
    }
    assert_eq!(report["needle_as_text"], true, "{report}");
    assert_eq!(report["needle_elements"], 0, "{report}");
    assert_eq!(report["scripts"], 1);
    assert_eq!(report["console_errors"], json!([]), "{report}");
    let caught = report["self_check_errors"].as_array().map(Vec::len);
    assert!(
        caught >= Some(2),
        "the capture missed its self-check: {report}"
    );
    assert_eq!(
        report["misaligned"],
        json!([]),
        "headers not over their columns"
    );
    assert_eq!(report["long_cells_without_title"], 0, "{report}");
    let times = report["times"].as_array().cloned().unwrap_or_default();
    assert!(
        times.len() > 1,
        "the render time and receipt times: {report}"
    );
    for t in &times {
        let utc = t["datetime"].as_str().unwrap_or_default();
        assert!(utc.ends_with('Z'), "{t}");
        assert_eq!(t["title"], format!("{utc} UTC"), "{t}");
        assert_ne!(t["text"], utc, "not shown in the browser's zone: {t}");
    }
    // The charts and their totals, as the browser shows them, equal the command's numbers.
    let traffic = &report["traffic"];
    let rows = |series: &str| {
        let rows = traffic["rows"].as_array().cloned().unwrap_or_default();
        let mut of: Vec<Value> = rows.into_iter().filter(|r| r["series"] == series).collect();
        for row in &mut of {
            if let Some(row) = row.as_object_mut() {
                row.remove("series");
                if series == "upstream" {
                    row.remove("upstream");
                }
            }
        }
        sorted(of)
    };
    let (want_upstreams, want_tools) = summary(&gw, "1h");
    assert_eq!(rows("upstream"), want_upstreams, "{report}");
    assert_eq!(rows("tool"), want_tools, "{report}");
    assert_eq!(traffic["charts"], 3, "{report}");
    assert_eq!(traffic["charts_as_images"], 3, "{report}");
    // A bar per minute with calls: the calls came within a minute or two.
    let bars = traffic["bars"].as_u64().unwrap_or_default();
    assert!((3..=6).contains(&bars), "{report}");
    for name in ["status.png", "status-phone.png"] {
        let shot = std::fs::metadata(artefacts().join(name)).expect("screenshot kept");
        assert!(shot.len() > 1000, "{name}");
    }
}

/// Proves: an approver signed in through the browser sees the pending call,
/// approves it from the page (the page's script POSTs to `/approvals/{id}` with the browser's
/// credentials), the page shows it decided, the waiting call completes, and no console error
/// happens.
#[tokio::test]
async fn an_approval_is_decided_from_the_page() {
    let callers = format!(
        "callers:\n  - name: alice\n    api_key_sha256: {}\n    tools: ['*']\n\
         \x20 - name: carol\n    api_key_sha256: {}\n    tools: []\n    roles: [admin]\n\
         approvers: [carol]\n",
        hash_key(KEY),
        hash_key(common::CAROL),
    );
    let contract = format!(
        "upstream: demo\ntools:\n{}",
        common::echo_tool("echo", 40, "    approval: approver\n")
    );
    let gw = Gateway::start(
        &demo_stdio_config(&callers, ""),
        &[("demo.yaml", &contract)],
    );
    let alice = client(&gw.url, KEY).await;
    let waiting = tokio::spawn(async move {
        let answer = call(&alice, "echo", json!({"message": "approve me"})).await;
        let _ = alice.cancel().await;
        answer
    });
    // The call is pending once the page lists it.
    gw.retry_until(
        Duration::from_secs(30),
        "the call listed as pending on the status page",
        async || {
            let text = get(&gw, "/status", Auth::Basic(common::CAROL))
                .await
                .text()
                .await;
            match text {
                Ok(t) if t.contains("data-decision=\"approve\"") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let report = drive_chromium(&gw, common::CAROL, "approval.png", &["--decide", "approve"]);
    assert_eq!(report["decision"]["note"], "approved", "{report}");
    assert_eq!(report["decision"]["decided"], "approve", "{report}");
    assert_eq!(report["console_errors"], json!([]), "{report}");
    let answer = waiting.await.expect("the waiting call").expect("answered");
    assert_ne!(answer.is_error, Some(true), "{answer:?}");
}
