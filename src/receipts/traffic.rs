//! Traffic over time, read from the receipts: calls per minute by outcome and latency percentiles,
//! per tool and per upstream, for the status page's charts and `narrowgate receipts --summary`.
//!
//! Why a summary table: an operator opens the status page during an incident, when the receipts
//! store may hold tens of millions of rows; a chart over the last 24 hours must not read them all.
//! So a roll-up ([`rollup`]) writes, once a minute has ended (plus [`GRACE_MS`] for receipts still
//! being committed), one row per minute, tool, upstream and outcome: the calls and a latency
//! histogram. A window then reads at most `minutes × series` summary rows plus the raw receipts of
//! the last minutes not rolled up yet ([`LIVE_MINUTES`] at most): bounded, whatever the store
//! holds. The roll-up runs on a thread of its own, never on a call's path.
//!
//! A receipt counts in the minute it was written (its id, a UUIDv7, says when: the call had
//! ended), as a Prometheus counter counts a call when it ends. Both the roll-up and `narrowgate
//! receipts --summary` tally rows with [`Minutes::add`], so the page and the command agree.

pub mod rollup;

use std::collections::BTreeMap;

use super::Outcome;

/// How long after a minute ends its receipts are taken as all written: a receipt's id is made
/// before its commit, and replicas' clocks differ a little. Later receipts of that minute are
/// left out of its summary.
pub const GRACE_MS: i64 = 30_000;
/// The most minutes read from raw receipts for one window: when the roll-up lags further (it is
/// catching up with a large store after an upgrade), older minutes are shown as not summarised.
pub const LIVE_MINUTES: i64 = 10;
/// Summary rows are kept this long (the longest window, and an hour's margin).
pub const KEPT_MINUTES: i64 = 25 * 60;

/// A chart window of the status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    FifteenMinutes,
    Hour,
    Day,
}

impl Window {
    /// Every window, shortest first.
    pub const ALL: [Window; 3] = [Window::FifteenMinutes, Window::Hour, Window::Day];

    /// `15m`, `1h` or `24h`.
    pub fn parse(name: &str) -> Option<Window> {
        Window::ALL.into_iter().find(|w| w.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Window::FifteenMinutes => "15m",
            Window::Hour => "1h",
            Window::Day => "24h",
        }
    }

    /// The minutes the window spans.
    pub fn minutes(self) -> i64 {
        match self {
            Window::FifteenMinutes => 15,
            Window::Hour => 60,
            Window::Day => 24 * 60,
        }
    }

    /// The minutes one bar of its charts spans.
    pub fn bucket_minutes(self) -> i64 {
        match self {
            Window::FifteenMinutes | Window::Hour => 1,
            Window::Day => 15,
        }
    }

    /// The number of bars.
    pub fn buckets(self) -> usize {
        usize::try_from(self.minutes() / self.bucket_minutes()).unwrap_or(0)
    }
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Buckets per doubling of the latency: each bucket is 2^(1/8) ≈ 9% wider than the one below, so
/// a percentile read from it is at most 9% above the exact one.
const PER_DOUBLING: f64 = 8.0;
/// The upper bound of bucket 0, in milliseconds.
const SMALLEST_MS: f64 = 0.01;
/// The last bucket holds everything from about 2 hours on.
const LAST_BUCKET: u16 = 239;

/// Latencies in logarithmic buckets: mergeable across minutes, tools and replicas, and a handful of
/// numbers per summary row. Percentiles are a bucket's upper bound ([`Histogram::quantile`]).
///
/// Sparse and sorted: a minute's calls fill a few dozen of the 240 buckets, and a chart merges
/// thousands of histograms, which a sorted vector does in one pass each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    /// (bucket, calls), buckets ascending, no zero counts.
    counts: Vec<(u16, u64)>,
}

impl Histogram {
    /// The bucket a latency of `ms` falls in.
    fn bucket(ms: f64) -> u16 {
        // Also NaN, which is not greater than anything.
        if ms.is_nan() || ms <= SMALLEST_MS {
            return 0;
        }
        let index = ((ms / SMALLEST_MS).log2() * PER_DOUBLING).ceil();
        if index >= f64::from(LAST_BUCKET) {
            LAST_BUCKET
        } else {
            index as u16
        }
    }

    /// The upper bound of `bucket`, in milliseconds.
    pub fn upper_bound(bucket: u16) -> f64 {
        SMALLEST_MS * (f64::from(bucket) / PER_DOUBLING).exp2()
    }

    pub fn record(&mut self, ms: f64) {
        self.add(Histogram::bucket(ms), 1);
    }

    fn add(&mut self, bucket: u16, n: u64) {
        match self.counts.binary_search_by_key(&bucket, |(b, _)| *b) {
            Ok(i) => self.counts[i].1 += n,
            Err(i) => self.counts.insert(i, (bucket, n)),
        }
    }

    pub fn merge(&mut self, other: &Histogram) {
        if other.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.counts.clone_from(&other.counts);
            return;
        }
        // Most merges add to buckets already there (a chart's bars fill the same few dozen):
        // then in place, with no new vector.
        let mut at = 0;
        let mut in_place = true;
        for (bucket, _) in &other.counts {
            match self.counts[at..].binary_search_by_key(bucket, |(b, _)| *b) {
                Ok(i) => at += i,
                Err(_) => {
                    in_place = false;
                    break;
                }
            }
        }
        if in_place {
            let mut at = 0;
            for (bucket, n) in &other.counts {
                if let Ok(i) = self.counts[at..].binary_search_by_key(bucket, |(b, _)| *b) {
                    at += i;
                    self.counts[at].1 += n;
                }
            }
            return;
        }
        let (a, b) = (&self.counts, &other.counts);
        let mut merged = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let (x, y) = (a[i], b[j]);
            if x.0 == y.0 {
                merged.push((x.0, x.1 + y.1));
                (i, j) = (i + 1, j + 1);
            } else if x.0 < y.0 {
                merged.push(x);
                i += 1;
            } else {
                merged.push(y);
                j += 1;
            }
        }
        merged.extend_from_slice(&a[i..]);
        merged.extend_from_slice(&b[j..]);
        self.counts = merged;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    /// The `q` quantile (0 < q ≤ 1): the upper bound of the bucket holding the call ranked
    /// ⌈q·n⌉, in milliseconds. None without calls.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (bucket, n) in &self.counts {
            seen += n;
            if seen >= rank {
                return Some(Histogram::upper_bound(*bucket));
            }
        }
        None
    }

    /// The stored form: `bucket:count` pairs separated by spaces, buckets ascending.
    pub fn encode(&self) -> String {
        let pairs: Vec<String> = self
            .counts
            .iter()
            .map(|(b, n)| format!("{b}:{n}"))
            .collect();
        pairs.join(" ")
    }

    /// Reads [`encode`](Self::encode)'s form; None for anything else.
    pub fn decode(text: &str) -> Option<Histogram> {
        let mut histogram = Histogram::default();
        for pair in text.split_ascii_whitespace() {
            let (bucket, n) = pair.split_once(':')?;
            let bucket: u16 = bucket.parse().ok()?;
            if bucket > LAST_BUCKET {
                return None;
            }
            let n: u64 = n.parse().ok()?;
            match histogram.counts.last() {
                // The stored form is ascending: appending is the common case.
                Some((last, _)) if *last < bucket => histogram.counts.push((bucket, n)),
                None => histogram.counts.push((bucket, n)),
                Some(_) => histogram.add(bucket, n),
            }
        }
        histogram.counts.retain(|(_, n)| *n > 0);
        Some(histogram)
    }
}

/// The calls of one series in one stretch of time: a latency histogram per outcome (its count is
/// the number of calls with that outcome), and one of the calls sent upstream, kept as they are
/// added so that a chart's hundreds of percentiles need no merging.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    by_outcome: [Histogram; Outcome::ALL.len()],
    sent: Histogram,
}

impl Tally {
    fn index(outcome: Outcome) -> usize {
        Outcome::ALL.iter().position(|o| *o == outcome).unwrap_or(0)
    }

    pub fn add(&mut self, outcome: Outcome, ms: f64) {
        self.by_outcome[Tally::index(outcome)].record(ms);
        if sent_upstream(outcome) {
            self.sent.record(ms);
        }
    }

    fn add_histogram(&mut self, outcome: Outcome, histogram: &Histogram) {
        self.by_outcome[Tally::index(outcome)].merge(histogram);
        if sent_upstream(outcome) {
            self.sent.merge(histogram);
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        for (mine, theirs) in self.by_outcome.iter_mut().zip(&other.by_outcome) {
            mine.merge(theirs);
        }
        self.sent.merge(&other.sent);
    }

    /// Calls with `outcome`.
    pub fn count(&self, outcome: Outcome) -> u64 {
        self.by_outcome[Tally::index(outcome)].count()
    }

    /// Every call.
    pub fn calls(&self) -> u64 {
        self.by_outcome.iter().map(Histogram::count).sum()
    }

    /// The latencies of the calls that were sent upstream: every outcome but those refused
    /// before the upstream (`denied`, `rejected_input`, `rate_limited`), whose microseconds would
    /// hide how slow the upstream is.
    #[cfg(test)]
    pub fn latency(&self) -> &Histogram {
        &self.sent
    }

    /// The median latency of the calls sent upstream, in milliseconds.
    pub fn p50(&self) -> Option<f64> {
        self.sent.quantile(0.50)
    }

    /// The 99th percentile latency of the calls sent upstream, in milliseconds.
    pub fn p99(&self) -> Option<f64> {
        self.sent.quantile(0.99)
    }

    /// Each outcome with its histogram, for storing.
    fn outcomes(&self) -> impl Iterator<Item = (Outcome, &Histogram)> {
        Outcome::ALL
            .into_iter()
            .zip(&self.by_outcome)
            .filter(|(_, h)| h.count() > 0)
    }
}

/// Whether a call with `outcome` reached the upstream (see [`Tally::latency`]).
pub fn sent_upstream(outcome: Outcome) -> bool {
    !matches!(
        outcome,
        Outcome::Denied | Outcome::RejectedInput | Outcome::RateLimited
    )
}

/// One tool's or one upstream's traffic over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The tool's or the upstream's name.
    pub name: String,
    /// For a tool: its upstream (none for a call of a name no contract has).
    pub upstream: Option<String>,
    /// One tally per bar, oldest first ([`Window::buckets`] of them).
    pub buckets: Vec<Tally>,
    /// The whole window.
    pub total: Tally,
}

/// What the status page charts for one window.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    pub window: Window,
    /// The first bar's first minute, in minutes since the Unix epoch.
    pub first_minute: i64,
    /// Per upstream, by name.
    pub upstreams: Vec<Series>,
    /// Per tool name, the most called first.
    pub tools: Vec<Series>,
    /// Minutes of the window before this one (minutes since the epoch) that the roll-up has not
    /// summarised yet are missing from the charts; None when nothing is missing.
    pub missing_before: Option<i64>,
}

impl Traffic {
    /// The instant (milliseconds since the epoch) bar `index` starts.
    pub fn bucket_start_millis(&self, index: usize) -> i64 {
        (self.first_minute + index as i64 * self.window.bucket_minutes()) * 60_000
    }
}

/// Which series a tally belongs to in one minute.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// Minutes since the Unix epoch.
    pub minute: i64,
    pub tool: String,
    /// Empty for a call of a name no contract has.
    pub upstream: String,
}

/// Tallies per minute, tool and upstream: what the roll-up stores and a window is built from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Minutes {
    pub tallies: BTreeMap<Key, Tally>,
}

impl Minutes {
    /// One receipt: its id (a UUIDv7, whose time says the minute), tool, upstream, outcome and
    /// duration. A receipt whose id or outcome this build cannot read is left out.
    pub fn add(&mut self, id: &str, tool: &str, upstream: Option<&str>, outcome: &str, ms: f64) {
        let (Some(millis), Some(outcome)) = (millis_of_id(id), Outcome::parse(outcome)) else {
            return;
        };
        self.tally(millis.div_euclid(60_000), tool, upstream.unwrap_or(""))
            .add(outcome, ms);
    }

    /// A stored summary row.
    pub fn add_row(&mut self, key: Key, outcome: Outcome, histogram: &Histogram) {
        self.tallies
            .entry(key)
            .or_default()
            .add_histogram(outcome, histogram);
    }

    fn tally(&mut self, minute: i64, tool: &str, upstream: &str) -> &mut Tally {
        // Looked up before inserting: most receipts find their tally, and need no new strings.
        let key = Key {
            minute,
            tool: tool.to_string(),
            upstream: upstream.to_string(),
        };
        self.tallies.entry(key).or_default()
    }

    pub fn merge(&mut self, other: Minutes) {
        for (key, tally) in other.tallies {
            self.tallies.entry(key).or_default().merge(&tally);
        }
    }

    /// Every stored row: (key, outcome, histogram).
    pub fn rows(&self) -> impl Iterator<Item = (&Key, Outcome, &Histogram)> {
        self.tallies
            .iter()
            .flat_map(|(key, tally)| tally.outcomes().map(move |(o, h)| (key, o, h)))
    }

    /// Each upstream's and each tool's whole tally (`narrowgate receipts --summary`): upstreams
    /// by name, and tools by name with their upstream (none for a name no contract has).
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for (key, tally) in &self.tallies {
            if !key.upstream.is_empty() {
                totals
                    .upstreams
                    .entry(key.upstream.clone())
                    .or_default()
                    .merge(tally);
            }
            let tool = totals.tools.entry(key.tool.clone()).or_default();
            if tool.0.is_none() && !key.upstream.is_empty() {
                tool.0 = Some(key.upstream.clone());
            }
            tool.1.merge(tally);
        }
        totals
    }

    /// The window of `window` whose last bar holds `now_minute`, per upstream and per tool.
    /// Consumes the tallies: most move into their bar as they are, without a merge.
    pub fn chart(self, window: Window, now_minute: i64, missing_before: Option<i64>) -> Traffic {
        let width = window.bucket_minutes();
        let first_minute = first_minute(window, now_minute);
        let last_first = first_minute + (window.buckets() as i64 - 1) * width;
        let mut tools: BTreeMap<String, Series> = BTreeMap::new();
        let mut upstreams: BTreeMap<String, Series> = BTreeMap::new();
        let empty = |name: &str, upstream: Option<&str>| Series {
            name: name.to_string(),
            upstream: upstream.map(str::to_string),
            buckets: vec![Tally::default(); window.buckets()],
            total: Tally::default(),
        };
        for (key, tally) in self.tallies {
            if key.minute < first_minute || key.minute >= last_first + width {
                continue;
            }
            let index = usize::try_from((key.minute - first_minute) / width).unwrap_or(0);
            let upstream = (!key.upstream.is_empty()).then_some(key.upstream.as_str());
            if let Some(upstream) = upstream {
                upstreams
                    .entry(upstream.to_string())
                    .or_insert_with(|| empty(upstream, None))
                    .buckets[index]
                    .merge(&tally);
            }
            let tool = tools
                .entry(key.tool.clone())
                .or_insert_with(|| empty(&key.tool, upstream));
            if tool.upstream.is_none() {
                tool.upstream = upstream.map(str::to_string);
            }
            let bar = &mut tool.buckets[index];
            if bar.calls() == 0 {
                *bar = tally;
            } else {
                bar.merge(&tally);
            }
        }
        // Totals from the bars: one merge per bar, not one per summary row.
        for series in tools.values_mut().chain(upstreams.values_mut()) {
            let mut total = Tally::default();
            for bar in &series.buckets {
                total.merge(bar);
            }
            series.total = total;
        }
        let mut tools: Vec<Series> = tools.into_values().collect();
        tools.sort_by(|a, b| {
            b.total
                .calls()
                .cmp(&a.total.calls())
                .then(a.name.cmp(&b.name))
        });
        Traffic {
            window,
            first_minute,
            upstreams: upstreams.into_values().collect(),
            tools,
            missing_before: missing_before.filter(|m| *m > first_minute),
        }
    }
}

/// Whole tallies per upstream and per tool: see [`Minutes::totals`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    pub upstreams: BTreeMap<String, Tally>,
    /// Per tool name: its upstream and its tally.
    pub tools: BTreeMap<String, (Option<String>, Tally)>,
}

/// The first minute of the first bar of `window` when its last bar holds `now_minute`: bars
/// start on multiples of their width, so a reload within the same bar draws the same bars.
pub fn first_minute(window: Window, now_minute: i64) -> i64 {
    let width = window.bucket_minutes();
    now_minute.div_euclid(width) * width - (window.buckets() as i64 - 1) * width
}

/// The charts of `window` ending in the minute of `now_millis`: summaries for the minutes the
/// roll-up has done, raw receipts after them (at most [`LIVE_MINUTES`]); minutes between the two
/// are reported missing ([`Traffic::missing_before`]).
pub fn read(store: &mut rollup::Store, window: Window, now_millis: i64) -> Result<Traffic, String> {
    let now_minute = now_millis.div_euclid(60_000);
    let first = first_minute(window, now_minute);
    let until = rollup::done_until(store);
    let live_floor = now_minute - LIVE_MINUTES + 1;
    let live_from = until.unwrap_or(live_floor).max(live_floor).max(first);
    let mut minutes = Minutes::default();
    if let Some(until) = until.filter(|u| *u > first) {
        let summarised_to = until.min(live_from);
        // 15-minute bars: whole quarters from their own summaries, the rest from minutes.
        let minutes_from = match window.bucket_minutes() {
            15 => {
                let quarters_to = summarised_to.div_euclid(15) * 15;
                minutes = rollup::summaries(store, rollup::Width::Quarter, first, quarters_to)?;
                quarters_to.max(first)
            }
            _ => first,
        };
        minutes.merge(rollup::summaries(
            store,
            rollup::Width::Minute,
            minutes_from,
            summarised_to,
        )?);
    }
    minutes.merge(store.raw(live_from * 60_000, None)?);
    let summarised_to = until.unwrap_or(first).max(first);
    let missing_before = (summarised_to < live_from).then_some(live_from);
    Ok(minutes.chart(window, now_minute, missing_before))
}

/// The millisecond timestamp of a UUIDv7 receipt id (`tttttttt-tttt-7…`).
pub fn millis_of_id(id: &str) -> Option<i64> {
    let high = id.get(0..8)?;
    let low = id.get(9..13)?;
    if id.as_bytes().get(8) != Some(&b'-') {
        return None;
    }
    let high = i64::from_str_radix(high, 16).ok()?;
    let low = i64::from_str_radix(low, 16).ok()?;
    Some((high << 16) | low)
}

#[cfg(test)]
mod tests;
