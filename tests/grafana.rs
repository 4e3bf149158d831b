//! The Grafana dashboard `deploy/grafana/narrowgate.json` against what the gateway really
//! exports: every PromQL query of every panel (rows and collapsed rows included) and of every
//! template variable names a series `/metrics` serves, with labels that series carries, and every
//! exported metric family has a panel. A renamed metric, a dropped label or a new family without
//! a panel fails here, not on an operator's screen during an incident.
//!
//! The PromQL is read by a small scanner of its own, not a parser: it knows identifiers,
//! strings, Grafana's `$variables`, `[range]`s, `{label matchers}` and the label lists of
//! `by`/`without`/`on`/`ignoring`/`group_left`/`group_right`, and treats every identifier that is
//! neither a PromQL function, an aggregation nor a keyword as a metric name.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;
use std::path::PathBuf;

use common::{
    Gateway, KEY, Raw, callers, contract_file, demo_stdio_config, echo_tool, result_text,
};
use serde_json::{Value, json};

/// The protocol revision of the session the test opens.
const VERSION: &str = "2025-11-25";

/// Where the dashboard lives, from the repository's root.
const DASHBOARD: &str = "deploy/grafana/narrowgate.json";

/// PromQL's functions (Prometheus 3), which read metrics but are none.
const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "double_exponential_smoothing",
    "end",
    "exp",
    "floor",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "holt_winters",
    "hour",
    "idelta",
    "increase",
    "info",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_by_label",
    "sort_by_label_desc",
    "sort_desc",
    "sqrt",
    "start",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "vector",
    "year",
];

/// PromQL's aggregation operators: a `by`/`without` list belongs to one of them.
const AGGREGATIONS: &[&str] = &[
    "avg",
    "bottomk",
    "count",
    "count_values",
    "group",
    "limit_ratio",
    "limitk",
    "max",
    "min",
    "quantile",
    "stddev",
    "stdvar",
    "sum",
    "topk",
];

/// Label lists of an aggregation: the labels must be on the metrics it aggregates.
const GROUPING: &[&str] = &["by", "without"];

/// Label lists of vector matching: the labels must be on every metric of the query.
const MATCHING: &[&str] = &["on", "ignoring", "group_left", "group_right"];

/// Keywords that are neither functions nor metrics (compared in lower case).
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];

/// One series name `/metrics` serves: its family and every label seen on it.
#[derive(Debug)]
struct Series {
    family: String,
    labels: BTreeSet<String>,
}

/// What one scrape of `/metrics` exported.
#[derive(Debug, Default)]
struct Exported {
    /// Family name (as in `# TYPE`) to its type.
    families: BTreeMap<String, String>,
    /// Series name (`_total`, `_bucket`, `_sum`, `_count` included) to its family and labels.
    series: BTreeMap<String, Series>,
}

impl Exported {
    fn names(&self) -> String {
        self.series.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Reads the families (`# TYPE` lines) and the samples' names and label names of an OpenMetrics
/// (or 0.0.4) text. Panics on a sample whose family has no `# TYPE`.
fn parse_exposition(text: &str) -> Exported {
    let mut exported = Exported::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (family, kind) = rest
                .split_once(' ')
                .unwrap_or_else(|| panic!("bad # TYPE line {line:?}"));
            exported
                .families
                .insert(family.to_string(), kind.to_string());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("no value in {line:?}"));
        let name = &line[..end];
        let labels = match line[end..].strip_prefix('{') {
            Some(body) => sample_label_names(body, line),
            None => BTreeSet::new(),
        };
        let family = family_of(name, &exported.families)
            .unwrap_or_else(|| panic!("the sample {name} has no # TYPE before it:\n{text}"));
        exported
            .series
            .entry(name.to_string())
            .or_insert_with(|| Series {
                family,
                labels: BTreeSet::new(),
            })
            .labels
            .extend(labels);
    }
    exported
}

/// The family a series name belongs to: itself (a gauge), or a counter's or histogram's name
/// plus the suffix OpenMetrics gives its samples.
fn family_of(name: &str, families: &BTreeMap<String, String>) -> Option<String> {
    families.iter().find_map(|(family, kind)| {
        let suffixes: &[&str] = match kind.as_str() {
            "counter" => &["_total", "_created"],
            "histogram" => &["_bucket", "_sum", "_count", "_created"],
            "summary" => &["_sum", "_count", "_created"],
            _ => &[""],
        };
        let suffix = name.strip_prefix(family.as_str())?;
        suffixes.contains(&suffix).then(|| family.clone())
    })
}

/// The label names of a sample's `{...}` (everything after the `{`), values skipped with their
/// escapes.
fn sample_label_names(body: &str, line: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = body;
    loop {
        rest = rest.trim_start_matches(',');
        if rest.starts_with('}') {
            return names;
        }
        let (name, value) = rest
            .split_once("=\"")
            .unwrap_or_else(|| panic!("bad label in {line:?}"));
        names.insert(name.to_string());
        let mut chars = value.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => {
                    chars.next();
                }
                Some((i, '"')) => break i,
                Some(_) => {}
                None => panic!("unterminated label value in {line:?}"),
            }
        };
        rest = &value[end + 1..];
    }
}

/// One metric a query reads, with every label the query needs it to carry (its matchers, and the
/// `by`/`without`/`on`/... lists that apply to it).
#[derive(Debug, PartialEq)]
struct Use {
    metric: String,
    labels: BTreeSet<String>,
}

#[derive(Debug)]
enum Token {
    Ident(String),
    /// A `{...}`: the label names of its matchers.
    Selector(Vec<String>),
    Open,
    Close,
    /// Anything else: a string, number, `$variable`, `[range]`, operator or comma.
    Other,
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    is_ident_start(c) || c.is_ascii_digit()
}

/// The index just past the string whose quote is at `start`.
fn skip_string(chars: &[char], start: usize) -> Result<usize, String> {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return Ok(i + 1),
            _ => i += 1,
        }
    }
    Err("an unterminated string".to_string())
}

/// The index just past `$name`, `${name...}` or `$__rate_interval` (a Grafana variable).
fn skip_variable(chars: &[char], start: usize) -> Result<usize, String> {
    if chars.get(start + 1) == Some(&'{') {
        return chars[start..]
            .iter()
            .position(|c| *c == '}')
            .map(|p| start + p + 1)
            .ok_or_else(|| "an unterminated ${variable}".to_string());
    }
    let mut i = start + 1;
    while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
        i += 1;
    }
    Ok(i)
}

/// The label names of the matchers of the `{` at `start`, and the index just past its `}`.
fn matchers(chars: &[char], start: usize) -> Result<(Vec<String>, usize), String> {
    let mut labels = Vec::new();
    let mut i = start + 1;
    let skip_space = |mut i: usize| {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        i
    };
    loop {
        i = skip_space(i);
        match chars.get(i) {
            None => return Err("an unclosed `{`".to_string()),
            Some('}') => return Ok((labels, i + 1)),
            Some(',') => {
                i += 1;
                continue;
            }
            Some(_) => {}
        }
        let name_start = i;
        while chars.get(i).is_some_and(|c| is_ident(*c) && *c != ':') {
            i += 1;
        }
        if i == name_start {
            return Err(format!("`{}` where a label name should be", chars[i]));
        }
        labels.push(chars[name_start..i].iter().collect());
        i = skip_space(i);
        let op: String = chars[i..chars.len().min(i + 2)].iter().collect();
        i += match op.as_str() {
            "=~" | "!~" | "!=" => 2,
            _ if op.starts_with('=') => 1,
            _ => {
                return Err(format!(
                    "no matcher operator after `{}`",
                    labels[labels.len() - 1]
                ));
            }
        };
        i = skip_space(i);
        match chars.get(i) {
            Some('"' | '\'' | '`') => i = skip_string(chars, i)?,
            _ => return Err("a label matcher whose value is not a string".to_string()),
        }
    }
}

fn tokenize(expr: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let token = match c {
            '"' | '\'' | '`' => {
                i = skip_string(&chars, i)?;
                Token::Other
            }
            '$' => {
                i = skip_variable(&chars, i)?;
                Token::Other
            }
            '[' => {
                let close = chars[i..]
                    .iter()
                    .position(|c| *c == ']')
                    .ok_or("an unclosed `[`")?;
                i += close + 1;
                Token::Other
            }
            '{' => {
                let (labels, next) = matchers(&chars, i)?;
                i = next;
                Token::Selector(labels)
            }
            '(' => {
                i += 1;
                Token::Open
            }
            ')' => {
                i += 1;
                Token::Close
            }
            c if c.is_ascii_digit() => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                Token::Other
            }
            c if is_ident_start(c) => {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                Token::Ident(chars[start..i].iter().collect())
            }
            _ => {
                i += 1;
                Token::Other
            }
        };
        tokens.push(token);
    }
    Ok(tokens)
}

/// The metrics one PromQL expression reads, each with the labels the expression needs on it; an
/// `Err` says why the expression cannot be read (unbalanced parentheses, an unknown function, a
/// `{...}` without a metric name, ...).
fn metric_uses(expr: &str) -> Result<Vec<Use>, String> {
    let tokens = tokenize(expr)?;
    // The matching parenthesis of every parenthesis.
    let mut partner = vec![usize::MAX; tokens.len()];
    let mut open = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::Open => open.push(i),
            Token::Close => {
                let o = open.pop().ok_or("an unmatched `)`")?;
                partner[o] = i;
                partner[i] = o;
            }
            _ => {}
        }
    }
    if !open.is_empty() {
        return Err("an unclosed `(`".to_string());
    }
    let mut uses: Vec<(usize, Use)> = Vec::new();
    let mut lists: Vec<(BTreeSet<String>, RangeInclusive<usize>)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            Token::Ident(name) => {
                // `sum by (x) (...)`: the aggregation is called after its label list.
                let called = matches!(tokens.get(i + 1), Some(Token::Open))
                    || (AGGREGATIONS.contains(&name.as_str())
                        && matches!(tokens.get(i + 1), Some(Token::Ident(g)) if GROUPING.contains(&g.as_str())));
                let grouping = GROUPING.contains(&name.as_str());
                if grouping || MATCHING.contains(&name.as_str()) {
                    if !called {
                        if grouping {
                            return Err(format!("`{name}` without a label list"));
                        }
                        i += 1; // group_left without labels
                        continue;
                    }
                    let close = partner[i + 1];
                    let labels = tokens[i + 2..close]
                        .iter()
                        .filter_map(|t| match t {
                            Token::Ident(l) => Some(l.clone()),
                            _ => None,
                        })
                        .collect();
                    let scope = if !grouping {
                        0..=tokens.len()
                    } else if i > 0
                        && matches!(&tokens[i - 1], Token::Ident(a) if AGGREGATIONS.contains(&a.as_str()))
                    {
                        // `sum by (x) (...)`
                        match tokens.get(close + 1) {
                            Some(Token::Open) => close + 1..=partner[close + 1],
                            _ => return Err(format!("no `(...)` after `{name} (...)`")),
                        }
                    } else if i > 0 && matches!(tokens[i - 1], Token::Close) {
                        // `sum (...) by (x)`
                        partner[i - 1]..=i - 1
                    } else {
                        return Err(format!("`{name}` after no aggregation"));
                    };
                    lists.push((labels, scope));
                    i = close + 1;
                    continue;
                }
                if called {
                    let function =
                        FUNCTIONS.contains(&name.as_str()) || AGGREGATIONS.contains(&name.as_str());
                    if !function {
                        return Err(format!("`{name}(`: no PromQL function is called so"));
                    }
                } else if !KEYWORDS.contains(&name.to_ascii_lowercase().as_str()) {
                    let labels = match tokens.get(i + 1) {
                        Some(Token::Selector(labels)) => labels.iter().cloned().collect(),
                        _ => BTreeSet::new(),
                    };
                    let metric = name.clone();
                    uses.push((i, Use { metric, labels }));
                }
                i += 1;
                if matches!(tokens.get(i), Some(Token::Selector(_))) {
                    i += 1;
                }
            }
            Token::Selector(_) => {
                return Err(
                    "a `{...}` without a metric name before it: name the metric".to_string()
                );
            }
            _ => i += 1,
        }
    }
    for (labels, scope) in lists {
        for (at, used) in &mut uses {
            if scope.contains(at) {
                used.labels.extend(labels.iter().cloned());
            }
        }
    }
    Ok(uses.into_iter().map(|(_, used)| used).collect())
}

/// What a template variable's query reads: metrics with labels, or (`label_values(label)`) one
/// label that some metric must carry.
#[derive(Debug, Default)]
struct VariableQuery {
    uses: Vec<Use>,
    any_metric_label: Option<String>,
}

/// Reads the Prometheus variable queries Grafana knows: `label_values(selector, label)`,
/// `label_values(label)`, `label_names()` and `query_result(expr)`.
fn variable_query(query: &str) -> Result<VariableQuery, String> {
    let query = query.trim();
    let inner = |prefix: &str| {
        query
            .strip_prefix(prefix)
            .and_then(|q| q.trim_start().strip_prefix('('))
            .and_then(|q| q.strip_suffix(')'))
            .map(str::trim)
    };
    if let Some(inner) = inner("label_values") {
        let is_label = |s: &str| !s.is_empty() && s.chars().all(|c| is_ident(c) && c != ':');
        if is_label(inner) {
            return Ok(VariableQuery {
                uses: Vec::new(),
                any_metric_label: Some(inner.to_string()),
            });
        }
        let (selector, label) = inner
            .rsplit_once(',')
            .ok_or_else(|| format!("cannot read {query:?}"))?;
        let label = label.trim();
        if !is_label(label) {
            return Err(format!("`{label}` is not a label name in {query:?}"));
        }
        let mut uses = metric_uses(selector)?;
        if uses.is_empty() {
            return Err(format!("no metric in {query:?}"));
        }
        for used in &mut uses {
            used.labels.insert(label.to_string());
        }
        return Ok(VariableQuery {
            uses,
            any_metric_label: None,
        });
    }
    if let Some(inner) = inner("query_result") {
        return Ok(VariableQuery {
            uses: metric_uses(inner)?,
            any_metric_label: None,
        });
    }
    if inner("label_names").is_some() {
        return Ok(VariableQuery::default());
    }
    Err(format!(
        "a variable query the checker does not read: {query:?} (label_values(...), \
         label_names() and query_result(...) it does)"
    ))
}

/// Every panel of `panels`, and of the rows among them (collapsed or not), depth first.
fn all_panels<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
    for panel in panels.as_array().into_iter().flatten() {
        out.push(panel);
        all_panels(&panel["panels"], out);
    }
}

/// Everything wrong with `dashboard` against `exported`, each an actionable sentence; empty when
/// every query reads exported series with labels they carry and every family has a panel.
fn check(dashboard: &Value, exported: &Exported) -> Vec<String> {
    let mut problems = Vec::new();
    let mut charted = BTreeSet::new();
    let mut verify = |place: &str, uses: &[Use], panel: bool, problems: &mut Vec<String>| {
        for used in uses {
            let Some(series) = exported.series.get(&used.metric) else {
                problems.push(format!(
                    "{place} queries {}, which the gateway does not export; exported: {}",
                    used.metric,
                    exported.names()
                ));
                continue;
            };
            if panel {
                charted.insert(series.family.clone());
            }
            for label in used.labels.difference(&series.labels) {
                problems.push(format!(
                    "{place} uses the label `{label}` on {}, which carries only: {}",
                    used.metric,
                    series.labels.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    };

    let variables = dashboard["templating"]["list"].as_array();
    let has_datasource = variables.into_iter().flatten().any(|v| {
        v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus"
    });
    if !has_datasource {
        problems.push(
            "the dashboard has no `datasource` template variable of type datasource for \
             Prometheus: its panels would be bound to one Grafana's datasource"
                .to_string(),
        );
    }
    for variable in variables.into_iter().flatten() {
        if variable["type"] != "query" {
            continue;
        }
        let name = variable["name"].as_str().unwrap_or("?");
        let place = format!("the variable '{name}'");
        let query = match &variable["query"] {
            Value::String(q) => Some(q.as_str()),
            q => q["query"].as_str(),
        };
        let queries = [query, variable["definition"].as_str()];
        for query in queries.into_iter().flatten().collect::<BTreeSet<_>>() {
            match variable_query(query) {
                Ok(read) => {
                    verify(&place, &read.uses, false, &mut problems);
                    if let Some(label) = read.any_metric_label
                        && !exported.series.values().any(|s| s.labels.contains(&label))
                    {
                        problems.push(format!(
                            "{place} lists the values of `{label}`, which no exported metric \
                             carries"
                        ));
                    }
                }
                Err(e) => problems.push(format!("{place}: {e}")),
            }
        }
    }

    let mut panels = Vec::new();
    all_panels(&dashboard["panels"], &mut panels);
    let mut queries = 0;
    for panel in panels {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or("?");
        let place = format!("panel '{title}'");
        if panel["description"]
            .as_str()
            .is_none_or(|d| d.trim().is_empty())
        {
            problems.push(format!(
                "{place} has no description: say what it shows and from which metric"
            ));
        }
        if panel["datasource"]["uid"] != "${datasource}" {
            problems.push(format!(
                "{place} is not on the `${{datasource}}` variable: its datasource is {}",
                panel["datasource"]
            ));
        }
        let targets = panel["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if targets.is_empty() {
            problems.push(format!("{place} has no query"));
        }
        for target in targets {
            let Some(expr) = target["expr"].as_str() else {
                problems.push(format!(
                    "{place}: target {} has no PromQL `expr`",
                    target["refId"]
                ));
                continue;
            };
            queries += 1;
            match metric_uses(expr) {
                Ok(uses) if uses.is_empty() => {
                    problems.push(format!("{place}: no metric in {expr:?}"));
                }
                Ok(uses) => verify(&place, &uses, true, &mut problems),
                Err(e) => problems.push(format!("{place}: cannot read {expr:?}: {e}")),
            }
        }
    }
    if queries == 0 {
        problems.push("the dashboard has no panel queries at all".to_string());
    }
    for (family, kind) in &exported.families {
        if !charted.contains(family) {
            problems.push(format!(
                "no panel queries {family} (a {kind} the gateway exports): add one to {DASHBOARD}"
            ));
        }
    }
    problems
}

fn load_dashboard() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(DASHBOARD);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

/// Proves: after calls that end ok, in a refusal of arguments and in a refusal of an unknown
/// tool (so every family and every label the gateway exports is in the scrape), every PromQL
/// query in `deploy/grafana/narrowgate.json` (every target of every panel, rows and collapsed
/// rows included, and every template variable's query) names a series `/metrics` serves, every
/// label it matches on or groups by is on that series, every exported family has at least one
/// panel, and every panel has a description and reads the `${datasource}` variable.
#[tokio::test]
async fn every_dashboard_query_reads_what_the_gateway_exports() {
    let contract = contract_file("demo", &[&echo_tool("echo", 20, "")]);
    let gw = Gateway::start(
        &demo_stdio_config(&callers(&[]), "telemetry:\n  metrics: true\n"),
        &[("demo.yaml", contract.as_str())],
    );
    let raw = Raw::new(&gw.url);
    let session = raw.open_session(Some(KEY), VERSION).await;
    let call = |params: Value| {
        let (raw, session) = (&raw, &session);
        async move {
            raw.request(Some(KEY), session, VERSION, "tools/call", params)
                .await
                .message()
        }
    };
    let ok = call(json!({"name": "echo", "arguments": {"message": "hi"}})).await;
    assert_eq!(result_text(&ok["result"]), "Echo: hi", "{ok}");
    let too_long = "far too long for the contract";
    let rejected = call(json!({"name": "echo", "arguments": {"message": too_long}})).await;
    assert_eq!(rejected["result"]["isError"], true, "{rejected}");
    let denied = call(json!({"name": "nope", "arguments": {}})).await;
    assert_eq!(denied["error"]["code"], -32602, "{denied}");

    let response = reqwest::Client::new()
        .get(format!("{}/metrics", gw.base))
        .header("accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .await
        .expect("/metrics answers");
    assert_eq!(response.status(), 200, "metrics are on");
    let text = response.text().await.expect("the body of /metrics");
    let exported = parse_exposition(&text);
    assert!(!exported.families.is_empty(), "no families in:\n{text}");
    let sampled: BTreeSet<&String> = exported.series.values().map(|s| &s.family).collect();
    for family in exported.families.keys() {
        assert!(
            sampled.contains(family),
            "the scrape has no sample of {family}: make this test's calls reach it\n{text}"
        );
    }

    let problems = check(&load_dashboard(), &exported);
    assert!(
        problems.is_empty(),
        "{DASHBOARD} does not match what /metrics exports:\n- {}",
        problems.join("\n- ")
    );
}

/// A scrape shaped like the gateway's: one family of each kind.
const EXPOSITION: &str = r#"# HELP mcp_server_operation_duration_seconds Duration.
# TYPE mcp_server_operation_duration_seconds histogram
# UNIT mcp_server_operation_duration_seconds seconds
mcp_server_operation_duration_seconds_sum{mcp_method_name="tools/call",gen_ai_tool_name="echo",outcome="ok"} 0.01
mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call",gen_ai_tool_name="echo",outcome="ok"} 1
mcp_server_operation_duration_seconds_bucket{le="+Inf",mcp_method_name="tools/call",gen_ai_tool_name="echo",outcome="ok"} 1
# HELP narrowgate_rejections Refusals.
# TYPE narrowgate_rejections counter
narrowgate_rejections_total{outcome="de\"ni,ed}"} 0
# HELP narrowgate_upstream_up Up.
# TYPE narrowgate_upstream_up gauge
narrowgate_upstream_up{upstream="demo"} 1
# EOF
"#;

/// Proves: the checker is not vacuous. Over a small inline dashboard it reports a metric the
/// gateway does not export (`narrowgate_nonexistent_total`, in a panel inside a collapsed row),
/// a matcher label the series lacks, a `by` label the series lacks (`le` on `_count`), an unknown
/// function, a variable querying an unexported metric, a panel without a description and an
/// exported family no panel queries; it reads strings containing `{`, `,` and `)`, Grafana
/// variables, ranges and postfix `by` without complaint; and on the real dashboard it finds the
/// metrics of each query.
#[test]
fn the_checker_reports_what_the_gateway_does_not_export() {
    let exported = parse_exposition(EXPOSITION);
    assert_eq!(
        exported.series["narrowgate_rejections_total"].family,
        "narrowgate_rejections"
    );
    let ds = json!({"type": "prometheus", "uid": "${datasource}"});
    let panel = |title: &str, expr: &str| {
        json!({"type": "timeseries", "title": title, "description": "shows it",
               "datasource": ds, "targets": [{"refId": "A", "expr": expr}]})
    };
    let good = "sum(rate(mcp_server_operation_duration_seconds_count{outcome!~\"a{b,c)\", \
                gen_ai_tool_name=~\"$tool\"}[$__rate_interval])) by (outcome) / \
                sum(rate(narrowgate_rejections_total[${__range}]))";
    let mut undescribed = panel("quiet", "narrowgate_rejections_total");
    undescribed["description"] = json!("");
    let dashboard = json!({
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus"},
            {"name": "gone", "type": "query", "datasource": ds,
             "query": {"query": "label_values(narrowgate_gone, upstream)"}},
        ]},
        "panels": [
            panel("good", good),
            {"type": "row", "title": "hidden", "collapsed": true, "panels": [
                panel("nested", "sum(rate(narrowgate_nonexistent_total[5m]))"),
            ]},
            panel("matcher", "mcp_server_operation_duration_seconds_sum{upstream=\"demo\"}"),
            panel("grouping", "sum by (le) (mcp_server_operation_duration_seconds_count)"),
            panel("function", "rated(narrowgate_rejections_total[5m])"),
            undescribed,
        ],
    });
    let problems = check(&dashboard, &exported);
    let expected = [
        "the variable 'gone' queries narrowgate_gone, which the gateway does not export; \
         exported: mcp_server_operation_duration_seconds_bucket",
        "panel 'nested' queries narrowgate_nonexistent_total, which the gateway does not export",
        "panel 'matcher' uses the label `upstream` on mcp_server_operation_duration_seconds_sum, \
         which carries only: gen_ai_tool_name, mcp_method_name, outcome",
        "panel 'grouping' uses the label `le` on mcp_server_operation_duration_seconds_count",
        "panel 'function': cannot read \"rated(narrowgate_rejections_total[5m])\": `rated(`",
        "panel 'quiet' has no description",
        "no panel queries narrowgate_upstream_up (a gauge the gateway exports)",
    ];
    for sentence in expected {
        assert!(
            problems.iter().any(|p| p.starts_with(sentence)),
            "no problem starts with {sentence:?}; reported:\n{problems:#?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");

    // The real dashboard's queries are read, not skipped: each names at least one metric.
    let mut panels = Vec::new();
    let real = load_dashboard();
    all_panels(&real["panels"], &mut panels);
    let mut read = 0;
    for expr in panels
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
    {
        let uses = metric_uses(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        assert!(!uses.is_empty(), "no metric found in {expr}");
        read += 1;
    }
    assert!(read >= 10, "only {read} queries in {DASHBOARD}");
    let quantile = metric_uses(
        "histogram_quantile(0.99, sum by (le, gen_ai_tool_name) \
         (rate(mcp_server_operation_duration_seconds_bucket{mcp_method_name=\"tools/call\"}[5m])))",
    )
    .expect("a quantile query reads");
    let labels = ["gen_ai_tool_name", "le", "mcp_method_name"];
    assert_eq!(
        quantile,
        vec![Use {
            metric: "mcp_server_operation_duration_seconds_bucket".to_string(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
        }]
    );
}
