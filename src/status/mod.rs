//! `GET /status`: an HTML page for callers with the `admin` role and for approvers. Its panels:
//! the traffic over a window (`?window=15m|1h|24h`: charts per upstream and per tool, in
//! [`charts`]), the upstreams and their health (what `/readyz` knows), every tool with its
//! verdict and reason (the catalog), recent receipts with filters
//! (`?caller=&tool=&outcome=&limit=`, read by the same query code as `narrowgate receipts`), the
//! calls a rate limit refused (receipts with outcome `rate_limited`), and the pending approvals
//! ([`approvals`], the page's one seam with them).
//!
//! It sits beside the MCP endpoint with the same first layers (`http::admit`,
//! `http::check_host_and_origin`), then [`browser::authenticate`], which also accepts HTTP Basic
//! so that a browser can sign in.

pub mod approvals;
mod charts;
mod html;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::policy::Caller;
use crate::receipts::Filter;
use crate::receipts::query::Source;
use crate::receipts::traffic::{Traffic, Window};
use crate::receipts::{Outcome, Receipt, Settings};
use crate::request::Admitted;
use crate::request::rejection::Rejection;
use crate::runtime::Version;
use crate::runtime::catalog::Entry;
use crate::upstream::Status;

/// The role whose callers may see the page.
pub const ADMIN_ROLE: &str = "admin";
/// Receipts shown when the query does not say.
pub const DEFAULT_LIMIT: u64 = 50;
/// The most receipts one page shows.
pub const MAX_LIMIT: u64 = 500;
/// Rate-limit refusals shown.
pub const RATE_LIMITED_SHOWN: u64 = 20;
/// The charts' window when the query does not say.
pub const DEFAULT_WINDOW: Window = Window::Hour;

/// Whether `caller` may see the status page: a caller with the `admin` role, or an approver.
pub fn may_see_status(caller: &Caller, gateway: &Version) -> bool {
    caller.roles.iter().any(|r| r == ADMIN_ROLE) || approvals::is_approver(caller, gateway)
}

/// The query string: the receipts panel's filters and the charts' window. An empty field is no
/// filter (the default window); a name given twice takes its last value; unknown names are
/// ignored.
#[derive(Debug, Default)]
struct Query_ {
    caller: Option<String>,
    tool: Option<String>,
    outcome: Option<String>,
    limit: Option<String>,
    window: Option<String>,
}

impl Query_ {
    fn parse(query: Option<&str>) -> Query_ {
        let mut q = Query_::default();
        for (name, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let field = match name.as_ref() {
                "caller" => &mut q.caller,
                "tool" => &mut q.tool,
                "outcome" => &mut q.outcome,
                "limit" => &mut q.limit,
                "window" => &mut q.window,
                _ => continue,
            };
            *field = Some(value.into_owned());
        }
        q
    }
}

/// The receipts panel's filters and the charts' window, as read from the query.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Filters {
    caller: Option<String>,
    tool: Option<String>,
    outcome: Option<Outcome>,
    limit: u64,
    window: Window,
}

impl Filters {
    fn of(query: Query_) -> Result<Filters, String> {
        let given = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let outcome = match given(query.outcome) {
            None => None,
            Some(name) => Some(Outcome::parse(name.trim()).ok_or_else(|| {
                let names: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
                format!("`outcome` must be one of {}", names.join(", "))
            })?),
        };
        let limit = match given(query.limit) {
            None => DEFAULT_LIMIT,
            Some(n) => match n.trim().parse::<u64>() {
                Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
                _ => return Err(format!("`limit` must be a number from 1 to {MAX_LIMIT}")),
            },
        };
        let window = match given(query.window) {
            None => DEFAULT_WINDOW,
            Some(name) => Window::parse(name.trim()).ok_or_else(|| {
                let names: Vec<&str> = Window::ALL.iter().map(|w| w.as_str()).collect();
                format!("`window` must be one of {}", names.join(", "))
            })?,
        };
        Ok(Filters {
            caller: given(query.caller),
            tool: given(query.tool),
            outcome,
            limit,
            window,
        })
    }

    /// The receipts filters as a query string (without the window), for links that change the
    /// window and keep the rest.
    fn query(&self) -> String {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in [("caller", &self.caller), ("tool", &self.tool)] {
            if let Some(value) = value {
                query.append_pair(name, value);
            }
        }
        if let Some(outcome) = self.outcome {
            query.append_pair("outcome", outcome.as_str());
        }
        if self.limit != DEFAULT_LIMIT {
            query.append_pair("limit", &self.limit.to_string());
        }
        query.finish()
    }
}

pub(crate) struct UpstreamRow {
    name: String,
    state: &'static str,
    tools: usize,
    reason: Option<String>,
}

pub(crate) struct ToolRow {
    name: String,
    upstream: String,
    state: &'static str,
    verdict: String,
    reason: String,
}

/// Everything the page shows, gathered before it is rendered.
pub(crate) struct View {
    caller: String,
    now: String,
    upstreams: Vec<UpstreamRow>,
    tools: Vec<ToolRow>,
    filters: Filters,
    receipts: Result<Vec<Receipt>, String>,
    rate_limited: Result<Vec<Receipt>, String>,
    /// The traffic panel, rendered here by [`charts`] (which uses `html`'s escaping: `html`
    /// calling it would make the two import each other).
    traffic: String,
    approvals: approvals::Pending,
    approver: bool,
}

/// `GET /status`. 401 without credentials (from [`browser::authenticate`]), 403 for a caller
/// who is neither admin nor approver, 400 for filters or a window that mean nothing, else the
/// page.
pub async fn page(request: Request) -> Result<Response, Rejection> {
    let admitted = request
        .extensions()
        .get::<Admitted>()
        .ok_or(Rejection::Internal("the request was not admitted"))?;
    let gateway = admitted.gateway.clone();
    let caller = admitted.caller.clone().ok_or(Rejection::Unauthenticated)?;
    if !may_see_status(&caller, &gateway) {
        tracing::info!(caller = %caller.name, "status page refused: 403");
        return Err(Rejection::NotForCaller(
            "the status page is for callers with the `admin` role and for approvers",
        ));
    }
    let filters = match Filters::of(Query_::parse(request.uri().query())) {
        Ok(filters) => filters,
        Err(e) => return Ok((StatusCode::BAD_REQUEST, e).into_response()),
    };
    let now = now_millis();
    let (receipts, rate_limited, traffic) = read_receipts(&gateway, &filters, now).await;
    let (upstreams, tools) = (upstreams(&gateway), tools(&gateway));
    let mut panel = String::new();
    charts::section(
        &mut panel,
        &charts::Panel {
            window: filters.window,
            traffic: &traffic,
            upstreams: upstreams
                .iter()
                .map(|u| (u.name.as_str(), u.state))
                .collect(),
            tools: tools.iter().map(|t| (t.name.as_str(), t.state)).collect(),
            others: &filters.query(),
        },
    );
    let view = View {
        caller: caller.name.clone(),
        now: crate::receipts::format_utc_millis(now),
        upstreams,
        tools,
        filters,
        receipts,
        rate_limited,
        traffic: panel,
        approvals: approvals::pending(&gateway).await,
        approver: approvals::is_approver(&caller, &gateway),
    };
    let mut response = axum::response::Html(html::render(&view)).into_response();
    let headers = response.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&html::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}

fn now_millis() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// Each upstream as the catalog last saw it, with the number of tools it listed.
fn upstreams(gateway: &Version) -> Vec<UpstreamRow> {
    gateway
        .kept
        .upstreams
        .iter()
        .map(|(name, upstream)| {
            let snapshot = upstream.snapshot();
            let (state, reason) = match snapshot.status {
                Status::Starting => ("starting", None),
                Status::Up => ("up", None),
                Status::Down { reason } => ("down", Some(reason)),
            };
            UpstreamRow {
                name: name.clone(),
                state,
                tools: snapshot.tools.len(),
                reason,
            }
        })
        .collect()
}

/// Every contract's tool: published (with the narrowing verdicts), waiting for its upstream, or
/// disabled (with why): what `/readyz` reports.
fn tools(gateway: &Version) -> Vec<ToolRow> {
    let catalog = gateway.catalog();
    catalog
        .entries
        .iter()
        .map(|(name, entry)| match entry {
            Entry::Exposed(tool) => {
                let upstream = tool.contract.upstream.clone();
                match &tool.upstream_schemas {
                    Some(s) => ToolRow {
                        name: name.clone(),
                        upstream,
                        state: "enabled",
                        verdict: match &s.output_verdict {
                            Some(output) => format!("input: {}; output: {output}", s.verdict),
                            None => format!("input: {}", s.verdict),
                        },
                        reason: String::new(),
                    },
                    None => ToolRow {
                        name: name.clone(),
                        reason: format!("upstream {upstream} has not listed its tools yet"),
                        upstream,
                        state: "unavailable",
                        verdict: String::new(),
                    },
                }
            }
            Entry::Disabled { contract, reason } => ToolRow {
                name: name.clone(),
                upstream: contract.upstream.clone(),
                state: "disabled",
                verdict: String::new(),
                reason: reason.clone(),
            },
        })
        .collect()
}

type Read = Result<Vec<Receipt>, String>;

/// The receipts the filters select, the latest rate-limit refusals and the traffic of the window
/// ending `now` (milliseconds since the epoch), read like `narrowgate receipts` reads them (the
/// SQLite file read-only, or PostgreSQL), off the async threads.
async fn read_receipts(
    gateway: &Version,
    filters: &Filters,
    now: i64,
) -> (Read, Read, Result<Traffic, String>) {
    let source = Source::of(&Settings::of(&gateway.config));
    let selected = Filter {
        tool: filters.tool.clone(),
        caller: filters.caller.clone(),
        outcome: filters.outcome,
        since: None::<Duration>,
        limit: Some(filters.limit),
    };
    let refused = Filter {
        outcome: Some(Outcome::RateLimited),
        limit: Some(RATE_LIMITED_SHOWN),
        ..Filter::default()
    };
    let window = filters.window;
    let read = tokio::task::spawn_blocking(move || {
        let read = |filter: &Filter| source.receipts(filter).map_err(|e| e.to_string());
        let traffic = source.traffic(window, now).map_err(|e| e.to_string());
        (read(&selected), read(&refused), traffic)
    });
    match read.await {
        Ok(all) => all,
        Err(_) => {
            let failed = "the reading task failed".to_string();
            (Err(failed.clone()), Err(failed.clone()), Err(failed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Query_ {
        let text = pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        Query_::parse(Some(&text))
    }

    /// Proves: empty fields are no filter, outcomes and limits are checked, the default limit
    /// applies.
    #[test]
    fn filters_are_read_from_the_query() {
        let all = Filters::of(query(&[("caller", ""), ("tool", ""), ("outcome", "")]));
        assert_eq!(
            all,
            Ok(Filters {
                caller: None,
                tool: None,
                outcome: None,
                limit: DEFAULT_LIMIT,
                window: DEFAULT_WINDOW,
            })
        );
        let some = Filters::of(query(&[
            ("caller", "bob"),
            ("outcome", "rate_limited"),
            ("limit", "5"),
        ]))
        .expect("filters");
        assert_eq!(some.caller.as_deref(), Some("bob"));
        assert_eq!(some.outcome, Some(Outcome::RateLimited));
        assert_eq!(some.limit, 5);
        assert!(Filters::of(query(&[("outcome", "nope")])).is_err());
        assert!(Filters::of(query(&[("limit", "0")])).is_err());
        assert!(Filters::of(query(&[("limit", "501")])).is_err());
    }

    /// Proves: the window is read from the query (1h by default, an empty value too), anything
    /// but 15m, 1h and 24h is refused with the allowed values named, and the links that change
    /// the window keep the receipts filters, encoded.
    #[test]
    fn the_window_is_read_from_the_query() {
        let window = |w: &str| Filters::of(query(&[("window", w)])).map(|f| f.window);
        assert_eq!(window(""), Ok(Window::Hour));
        assert_eq!(window("15m"), Ok(Window::FifteenMinutes));
        assert_eq!(window("24h"), Ok(Window::Day));
        let refused = window("2h").expect_err("2h is not a window");
        assert!(refused.contains("15m, 1h, 24h"), "{refused}");
        let filters =
            Filters::of(query(&[("caller", "a+b%26c"), ("limit", "5")])).expect("filters");
        assert_eq!(filters.query(), "caller=a+b%26c&limit=5");
        assert_eq!(Filters::of(query(&[])).expect("none").query(), "");
    }
}
