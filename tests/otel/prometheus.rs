//! A strict parser of the OpenMetrics text format (which Prometheus scrapes), enough to prove
//! `/metrics` is well-formed: `# HELP`/`# TYPE`/`# UNIT` lines, metric names, escaped label
//! values, numeric values, a `# TYPE` for every family before its samples, and `# EOF` last.

use std::collections::BTreeMap;

/// One sample of the Prometheus text format.
#[derive(Debug)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the text strictly: `# HELP`/`# TYPE`/`# UNIT` lines, samples
/// `name{label="value",...} number`, each sample's family declared by a `# TYPE` before it, and
/// one `# EOF`, the last line.
pub fn parse_prometheus(text: &str) -> Vec<Sample> {
    let text = text
        .strip_suffix("# EOF\n")
        .unwrap_or_else(|| panic!("the text does not end with `# EOF`:\n{text}"));
    let is_name = |s: &str| {
        !s.is_empty()
            && s.chars().enumerate().all(|(i, c)| {
                c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, tail) = (parts.next(), parts.next(), parts.next());
            let name = name.unwrap_or_else(|| panic!("bad comment line {line:?}"));
            assert!(is_name(name), "bad metric name in {line:?}");
            match (kind, tail) {
                (Some("HELP" | "UNIT"), Some(_)) => {}
                (Some("TYPE"), Some(t @ ("counter" | "gauge" | "histogram"))) => {
                    types.insert(name.to_string(), t.to_string());
                }
                _ => panic!("bad comment line {line:?}"),
            }
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value in {line:?}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels in {line:?}"));
                (name, parse_labels(body, line))
            }
        };
        assert!(is_name(name), "bad metric name in {line:?}");
        let suffixes = [
            ("_bucket", "histogram"),
            ("_sum", "histogram"),
            ("_count", "histogram"),
            ("_total", "counter"),
        ];
        let family = suffixes
            .iter()
            .find_map(|(suffix, kind)| {
                name.strip_suffix(suffix)
                    .filter(|f| types.get(*f).is_some_and(|t| t == kind))
            })
            .unwrap_or(name);
        assert!(
            types.get(family).is_none_or(|t| t != "counter") || name != family,
            "a counter's sample without `_total`: {line:?}"
        );
        assert!(types.contains_key(family), "no # TYPE before {line:?}");
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    samples
}

fn parse_labels(mut body: &str, line: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    while !body.is_empty() {
        let (name, rest) = body
            .split_once("=\"")
            .unwrap_or_else(|| panic!("bad label in {line:?}"));
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('\\' | '"'))) => value.push(c),
                    _ => panic!("bad escape in {line:?}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value in {line:?}"),
            }
        };
        labels.insert(name.to_string(), value);
        body = &rest[end + 1..];
        body = body.strip_prefix(',').unwrap_or(body);
    }
    labels
}

/// The value of the one sample named `name` whose labels include `labels`.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let matching: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(matching.len(), 1, "{name} {labels:?}: {matching:#?}");
    matching[0].value
}
