//! `bench-search`: what `search_tools` costs at scale, on the library alone.
//!
//! ```text
//! cargo run --release --example bench-search -- [TOOLS (default 10000)]
//! ```
//!
//! Loads TOOLS generated contracts (names `svcN_VERB_NOUN`, half with titles, descriptions of 10–40
//! words drawn from a 2,000-word vocabulary by a seeded generator, so every run is the same) the
//! way `narrowgate serve` does, builds the catalog as if the upstream had not listed yet (every
//! tool exposed), and times 1,000 searches of 2–5 words, limit 10, for a caller allowed half of
//! the tools, after a warm-up pass; and the index build (the first search of a new catalog: a
//! reload or a list change builds the new catalog's index on its first search, never on a call's
//! path). Prints one JSON object: build ms, index bytes (and per tool), search p50/p99/max µs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use narrowgate::harness::{Catalog, ContractSet, Snapshot, Status};
use serde_json::json;

/// A seeded LCG (Knuth's MMIX constants): the same catalogue and queries on every run.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Skewed towards low indices, so a few words are very common (as in real descriptions).
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((u * u) * n as f64) as usize
    }
}

fn vocabulary(rng: &mut Lcg, n: usize) -> Vec<String> {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "tur", "sen", "ob", "ra", "vi", "del", "qu", "pon", "ex", "ar", "zi",
        "mun", "te",
    ];
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < n {
        let k = 2 + rng.below(3);
        seen.insert(
            (0..k)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                .collect::<String>(),
        );
    }
    seen.into_iter().collect()
}

fn main() {
    let tools: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    const VERBS: &[&str] = &[
        "get", "list", "create", "delete", "update", "search", "read", "write", "sync", "export",
    ];
    let mut rng = Lcg(0x5eed);
    let vocab = vocabulary(&mut rng, 2000);
    let mut yaml = String::from("upstream: u\ntools:\n");
    for i in 0..tools {
        let (verb, noun) = (
            VERBS[rng.below(VERBS.len())],
            &vocab[rng.below(vocab.len())],
        );
        let words = 10 + rng.below(31);
        let description: Vec<&str> = (0..words)
            .map(|_| vocab[rng.skewed(vocab.len())].as_str())
            .collect();
        yaml.push_str(&format!(
            "  svc{i}_{verb}_{noun}:\n    privilege: read\n    description: \"{}\"\n",
            description.join(" ")
        ));
        if i % 2 == 0 {
            yaml.push_str(&format!("    title: \"{verb} {noun}\"\n"));
        }
    }
    let mut contracts = ContractSet::default();
    contracts
        .add_yaml(Path::new("bench.yaml"), &yaml)
        .expect("the generated contracts load");
    let snapshot = Snapshot {
        status: Status::Starting,
        tools: Arc::new(Vec::new()),
        protocol: None,
    };
    let upstreams = BTreeMap::from([("u".to_string(), snapshot)]);
    let queries: Vec<String> = (0..1000)
        .map(|i| {
            let k = 2 + rng.below(4);
            let mut q: Vec<String> = (0..k)
                .map(|_| vocab[rng.skewed(vocab.len())].clone())
                .collect();
            if i % 4 == 0 {
                q[0] = VERBS[rng.below(VERBS.len())].to_owned();
            }
            q.join(" ")
        })
        .collect();
    // The caller may call the tools with an even number.
    let allowed = |name: &str| {
        name.strip_prefix("svc")
            .and_then(|rest| rest.split('_').next())
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n % 2 == 0)
    };

    let mut builds = Vec::new();
    let mut catalog = Catalog::build(&contracts, &upstreams);
    for _ in 0..5 {
        catalog = Catalog::build(&contracts, &upstreams);
        let started = Instant::now();
        catalog.search("warm", 1, |_| false);
        builds.push(started.elapsed().as_secs_f64() * 1e3);
    }
    builds.sort_by(f64::total_cmp);
    let mut latencies = Vec::new();
    let mut returned = 0usize;
    for round in 0..3 {
        for q in &queries {
            let started = Instant::now();
            let found = catalog.search(q, 10, |t| allowed(&t.contract.name));
            let micros = started.elapsed().as_secs_f64() * 1e6;
            if round > 0 {
                latencies.push(micros);
                returned += found.len();
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    let bytes = catalog.search_index_bytes();
    let round = |x: f64| (x * 10.0).round() / 10.0;
    println!(
        "{}",
        json!({
            "tools": tools,
            "index_build_ms_median": round(builds[2]),
            "index_bytes": bytes,
            "index_bytes_per_tool": bytes / tools.max(1),
            "search_us_p50": round(pct(0.50)),
            "search_us_p99": round(pct(0.99)),
            "search_us_max": round(latencies[latencies.len() - 1]),
            "mean_results": round(returned as f64 / latencies.len() as f64),
        })
    );
}
