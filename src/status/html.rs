//! The status page as HTML: every panel rendered on the server, with its style and script inline
//! (no external assets), and every value escaped ([`escape`]): tool names, caller names, reasons
//! and arguments come from outside the operator's files.

use std::fmt::Write as _;
use std::sync::LazyLock;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::{DEFAULT_WINDOW, Filters, ToolRow, UpstreamRow, View};
use crate::receipts::{Outcome, Receipt};
use crate::status::approvals::{Pending, PendingView};

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The page's `Content-Security-Policy`: nothing but its own inline style and script (by their
/// digests), `fetch`es and forms to the gateway itself, no frames. A value that escaped
/// escaping still could not run.
pub static CONTENT_SECURITY_POLICY: LazyLock<String> = LazyLock::new(|| {
    let digest = |text: &str| {
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes()))
    };
    format!(
        "default-src 'none'; style-src 'sha256-{}'; script-src 'sha256-{}'; connect-src 'self'; \
         img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        digest(STYLE),
        digest(SCRIPT)
    )
});

/// `text` with the characters that mean something in HTML text and in quoted attribute values
/// replaced by references.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A cell for a value that may be long (a reason, a verdict, a name): cut to the column's width
/// by the style, the whole value in its `title`, shown on hover.
fn long_cell(text: &str) -> String {
    let text = escape(text);
    format!("<td class=\"long\" title=\"{text}\">{text}</td>")
}

/// An instant written in UTC (RFC 3339). The page's script shows it in the browser's zone and
/// keeps the UTC text on hover; without the script it reads as UTC.
pub(super) fn time(utc: &str) -> String {
    let utc = escape(utc);
    format!("<time datetime=\"{utc}\" title=\"{utc} UTC\">{utc}</time>")
}

/// The whole page.
pub fn render(view: &View) -> String {
    let mut page = String::with_capacity(16 * 1024);
    let _ = write!(
        page,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <link rel=\"icon\" href=\"data:,\"><title>narrowgate status</title>\
         <style>{STYLE}</style></head><body><header><h1>narrowgate status</h1>\
         <p>Signed in as <b id=\"caller\">{}</b>. Rendered at {}.</p></header>",
        escape(&view.caller),
        time(&view.now),
    );
    // First: during an incident, what changed and when is the question.
    page.push_str(&view.traffic);
    upstreams(&mut page, &view.upstreams);
    tools(&mut page, &view.tools);
    receipts(&mut page, &view.filters, &view.receipts);
    rate_limited(&mut page, &view.rate_limited);
    approvals(&mut page, &view.approvals, view.approver);
    let _ = write!(page, "<script>{SCRIPT}</script></body></html>");
    page
}

fn upstreams(page: &mut String, rows: &[UpstreamRow]) {
    page.push_str(
        "<section id=\"upstreams\"><h2>Upstreams</h2><table><thead><tr><th>upstream</th>\
         <th>state</th><th class=\"num\">tools listed</th><th>reason</th></tr></thead><tbody>",
    );
    for row in rows {
        let _ = write!(
            page,
            "<tr><td>{}</td><td class=\"{state}\">{state}</td><td class=\"num\">{}</td>{}</tr>",
            escape(&row.name),
            row.tools,
            long_cell(row.reason.as_deref().unwrap_or("")),
            state = row.state,
        );
    }
    if rows.is_empty() {
        page.push_str("<tr><td colspan=\"4\" class=\"empty\">no upstreams configured</td></tr>");
    }
    page.push_str("</tbody></table></section>");
}

fn tools(page: &mut String, rows: &[ToolRow]) {
    page.push_str(
        "<section id=\"tools\"><h2>Tools</h2><table><thead><tr><th>tool</th><th>upstream</th>\
         <th>state</th><th>verdict</th><th>reason</th></tr></thead><tbody>",
    );
    for row in rows {
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td class=\"{state}\">{state}</td>{}{}</tr>",
            escape(&row.name),
            escape(&row.upstream),
            long_cell(&row.verdict),
            long_cell(&row.reason),
            state = row.state,
        );
    }
    if rows.is_empty() {
        page.push_str("<tr><td colspan=\"5\" class=\"empty\">no contracts loaded</td></tr>");
    }
    page.push_str("</tbody></table></section>");
}

fn receipts(page: &mut String, filters: &Filters, rows: &Result<Vec<Receipt>, String>) {
    let _ = write!(
        page,
        "<section id=\"receipts\"><h2>Recent receipts</h2>\
         <form class=\"filters\" method=\"get\" action=\"/status\">\
         <label>caller<input name=\"caller\" value=\"{}\"></label>\
         <label>tool<input name=\"tool\" value=\"{}\"></label>\
         <label>outcome<select name=\"outcome\"><option value=\"\">any</option>",
        escape(filters.caller.as_deref().unwrap_or("")),
        escape(filters.tool.as_deref().unwrap_or("")),
    );
    for outcome in Outcome::ALL {
        let selected = match filters.outcome == Some(outcome) {
            true => " selected",
            false => "",
        };
        let _ = write!(page, "<option{selected}>{outcome}</option>");
    }
    // The chart window is kept by filtering and by clearing the filters.
    let (window, clear) = match filters.window == DEFAULT_WINDOW {
        true => (String::new(), String::new()),
        false => (
            format!(
                "<input type=\"hidden\" name=\"window\" value=\"{}\">",
                filters.window
            ),
            format!("?window={}", filters.window),
        ),
    };
    let _ = write!(
        page,
        "</select></label><label>at most<input name=\"limit\" type=\"number\" min=\"1\" \
         max=\"{}\" value=\"{}\"></label>{window}<button type=\"submit\">filter</button> \
         <a href=\"/status{clear}\">clear</a></form>",
        crate::status::MAX_LIMIT,
        filters.limit,
    );
    receipt_table(page, rows, "no receipts match");
    page.push_str("</section>");
}

fn rate_limited(page: &mut String, rows: &Result<Vec<Receipt>, String>) {
    let _ = write!(
        page,
        "<section id=\"rate-limited\"><h2>Rate-limit refusals</h2>\
         <p>The last {} calls a rate limit refused (receipts with outcome \
         <code>rate_limited</code>).</p>",
        crate::status::RATE_LIMITED_SHOWN,
    );
    receipt_table(page, rows, "no call was refused by a rate limit");
    page.push_str("</section>");
}

/// Receipts newest first.
fn receipt_table(page: &mut String, rows: &Result<Vec<Receipt>, String>, none: &str) {
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            let _ = write!(
                page,
                "<p class=\"error\">the receipts cannot be read: {}</p>",
                escape(e)
            );
            return;
        }
    };
    page.push_str(
        "<table><thead><tr><th>time</th><th>caller</th><th>tool</th><th>outcome</th>\
         <th>reason</th><th class=\"num\">attempts</th><th class=\"num\">ms</th></tr></thead><tbody>",
    );
    for r in rows.iter().rev() {
        let _ = write!(
            page,
            "<tr><td>{}</td>{}{}<td class=\"{outcome}\">{outcome}</td>\
             {}<td class=\"num\">{}</td><td class=\"num\">{:.1}</td></tr>",
            time(&r.time),
            long_cell(&r.caller),
            long_cell(&r.tool),
            long_cell(r.reason.as_deref().unwrap_or("")),
            r.attempts,
            r.duration_ms,
            outcome = escape(&r.outcome),
        );
    }
    if rows.is_empty() {
        let _ = write!(
            page,
            "<tr><td colspan=\"7\" class=\"empty\">{}</td></tr>",
            escape(none)
        );
    }
    page.push_str("</tbody></table>");
}

fn approvals(page: &mut String, pending: &Pending, approver: bool) {
    page.push_str("<section id=\"approvals\"><h2>Pending approvals</h2>");
    let waiting = match pending {
        Pending::NotConfigured => {
            page.push_str(
                "<p class=\"empty\">approvals are not configured on this gateway: \
                 no pending approvals</p></section>",
            );
            return;
        }
        Pending::Waiting(waiting) => waiting,
        Pending::Unreadable(why) => {
            let _ = write!(
                page,
                "<p class=\"error\">the pending approvals cannot be read: {}</p></section>",
                escape(why)
            );
            return;
        }
    };
    if !approver {
        page.push_str(
            "<p>Only approvers may decide (the configuration's <code>approvers</code>).</p>",
        );
    }
    page.push_str(
        "<table><thead><tr><th>id</th><th>caller</th><th>tool</th><th>arguments</th>\
         <th class=\"num\">waiting</th><th class=\"num\">expires in</th><th>decision</th></tr></thead><tbody>",
    );
    for p in waiting {
        approval_row(page, p, approver);
    }
    if waiting.is_empty() {
        page.push_str("<tr><td colspan=\"7\" class=\"empty\">no pending approvals</td></tr>");
    }
    page.push_str("</tbody></table></section>");
}

fn approval_row(page: &mut String, p: &PendingView, approver: bool) {
    let id = escape(&p.id);
    let _ = write!(
        page,
        "<tr data-id=\"{id}\"><td><code>{id}</code></td><td>{}</td><td>{}</td>\
         <td><pre>{}</pre></td><td class=\"num\">{:.0} s</td><td class=\"num\">{:.0} s</td><td>",
        escape(&p.caller),
        escape(&p.tool),
        escape(&p.arguments),
        p.age_seconds,
        p.expires_in_seconds,
    );
    if p.state != "pending" {
        let _ = write!(page, "{} ", escape(&p.state));
    } else if approver {
        let _ = write!(
            page,
            "<input name=\"reason\" placeholder=\"reason\" maxlength=\"500\"> \
             <button type=\"button\" data-id=\"{id}\" data-decision=\"approve\">approve</button> \
             <button type=\"button\" data-id=\"{id}\" data-decision=\"deny\">deny</button> "
        );
    }
    page.push_str("<span class=\"note\"></span></td></tr>");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: every character that could open a tag, an entity or leave a quoted attribute is
    /// replaced.
    #[test]
    fn escape_leaves_no_markup() {
        let hostile = "<img src=x onerror=\"alert('1')\">&amp;";
        let escaped = escape(hostile);
        assert_eq!(
            escaped,
            "&lt;img src=x onerror=&quot;alert(&#39;1&#39;)&quot;&gt;&amp;amp;"
        );
        assert!(!escaped.contains(['<', '>', '"', '\'']));
    }

    /// Proves: a pending approval's values are escaped, and the decision buttons appear only for
    /// an approver, and only while it is pending.
    #[test]
    fn approval_rows_escape_and_offer_buttons_to_approvers_only() {
        let p = PendingView {
            id: "a\"1".into(),
            caller: "<b>".into(),
            tool: "t".into(),
            arguments: "{\"x\":\"</pre><script>\"}".into(),
            age_seconds: 1.0,
            expires_in_seconds: 2.0,
            state: "pending".into(),
        };
        let mut page = String::new();
        approvals(&mut page, &Pending::Waiting(vec![p.clone()]), true);
        assert!(page.contains("data-id=\"a&quot;1\" data-decision=\"approve\""));
        assert!(!page.contains("<b>") && !page.contains("<script>"));
        let mut page = String::new();
        approvals(&mut page, &Pending::Waiting(vec![p.clone()]), false);
        assert!(!page.contains("data-decision"));
        let decided = PendingView {
            state: "approved".into(),
            ..p
        };
        let mut page = String::new();
        approvals(&mut page, &Pending::Waiting(vec![decided]), true);
        assert!(!page.contains("data-decision") && page.contains("approved"));
    }
}
