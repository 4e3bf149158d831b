//! The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, installed into
//! `.peers/conformance` by `tests/setup-peers.sh`) against the repository's demo upstream, run by
//! `tests/conformance/run.sh`, the same harness that measures the gateway
//! (`tests/conformance/run.sh --through-gateway`). A missing suite fails with a pointer to the setup
//! script.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::demo_upstream_bin;
use common::peers::repo_root;

/// The server scenarios of the suite's "active" set in 0.1.16 (`conformance list`, without the
/// pending `json-schema-2020-12` and `server-sse-polling`).
const ACTIVE_SCENARIOS: [&str; 30] = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
];

/// The whole suite takes a few seconds; this only bounds a hang.
const DEADLINE: Duration = Duration::from_secs(240);

/// Runs `tests/conformance/run.sh` with `args`, returning its exit code and its output; the run is
/// stopped (SIGTERM, so the script stops what it started) and the test fails after [`DEADLINE`].
fn run_harness(args: &[&str], results: &Path) -> (Option<i32>, String) {
    let out = results.with_extension("out");
    let log = std::fs::File::create(&out).expect("output file");
    let mut child = Command::new(repo_root().join("tests/conformance/run.sh"))
        .args(["--no-build", "--results"])
        .arg(results)
        .args(args)
        .env("NARROWGATE_BIN", env!("CARGO_BIN_EXE_narrowgate"))
        .env("DEMO_UPSTREAM_BIN", demo_upstream_bin())
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("output file"))
        .stderr(log)
        .spawn()
        .expect("start tests/conformance/run.sh");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for run.sh") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
            panic!(
                "run.sh did not finish within {DEADLINE:?}; its output:\n{}",
                std::fs::read_to_string(&out).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (
        status.code(),
        std::fs::read_to_string(&out).unwrap_or_default(),
    )
}

/// Proves the demo upstream is a complete conformance fixture: every active server scenario of
/// the suite passes against it directly, so that whatever fails through the gateway
/// (`run.sh --through-gateway`) is the gateway's. Fails if a fixture tool, resource or prompt
/// changes shape, or if the suite runs fewer scenarios than its active set.
#[test]
fn every_active_server_scenario_passes_against_the_demo_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let results = dir.path().join("results.tsv");
    let (code, output) = run_harness(&[], &results);
    assert_eq!(code, Some(0), "run.sh failed; its output:\n{output}");

    let table = std::fs::read_to_string(&results).expect("run.sh wrote --results");
    let mut seen = BTreeSet::new();
    for row in table.lines().skip(1) {
        let cells: Vec<&str> = row.split('\t').collect();
        assert_eq!(cells.get(1), Some(&"pass"), "{row}\n{output}");
        seen.insert(cells[0].to_owned());
    }
    let expected: BTreeSet<String> = ACTIVE_SCENARIOS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        seen, expected,
        "the scenarios run differ from the active set:\n{output}"
    );
}
