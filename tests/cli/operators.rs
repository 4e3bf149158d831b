//! The operators' commands in front of what people run: `init` and `check` need only the
//! environment of what they touch, `init --prefix` scaffolds a second copy of a server, `check`
//! names every problem of a run at once, and an upstream that fails to start is reported with
//! the last lines of its stderr (in `check`, and in `/readyz` of a running gateway).

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::common::Gateway;
use super::{Setup, demo_stdio, stderr, stdout, tool_row};

/// `narrowgate CMD --config FILE EXTRA...` with exactly `env` added (and the test's own
/// variables, below, unset whatever the runner's environment holds).
fn run_with(setup: &Setup, cmd: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_narrowgate"));
    command
        .arg(cmd)
        .arg("--config")
        .arg(setup.config())
        .args(extra)
        .env_remove("NARROWGATE_CONFIG")
        .stdin(Stdio::null());
    for var in [CALLER_KEY, PG_PASSWORD, OTHER_TOKEN] {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    command.output().expect("narrowgate runs")
}

const CALLER_KEY: &str = "NG_OPS_TEST_CI_BOT_KEY";
const PG_PASSWORD: &str = "NG_OPS_TEST_PG_PASSWORD";
const OTHER_TOKEN: &str = "NG_OPS_TEST_WEATHER_TOKEN";

/// The demo upstream, plus what a production file holds that `init --upstream demo` does not
/// touch: a caller keyed by an environment variable, another upstream's token, the receipts
/// database's password.
fn production_config() -> String {
    format!(
        "{}  weather:\n    url: http://127.0.0.1:1/mcp\n    headers: {{ Authorization: \"Bearer ${{{OTHER_TOKEN}}}\" }}\n\
         callers:\n  - name: ci-bot\n    api_key_env: {CALLER_KEY}\n    tools: [\"*\"]\n\
         receipts:\n  url: \"postgres://gw:${{{PG_PASSWORD}}}@127.0.0.1:1/gw\"\n",
        demo_stdio()
    )
}

/// Proves: `init --upstream demo` scaffolds the demo upstream without the caller's key, the
/// other upstream's token or the database password in the environment (it used to refuse until
/// every caller's key was set), and `check --offline` checks the files without them, warning
/// of each variable `serve` will need; `serve` itself still refuses to start without them.
#[test]
fn init_and_check_need_only_what_they_touch() {
    let setup = Setup::new(&production_config(), &[]);
    let init = run_with(&setup, "init", &["--upstream", "demo"], &[]);
    assert_eq!(init.status.code(), Some(0), "{init:?}");
    assert!(stdout(&init).contains("upstream: demo"), "{init:?}");
    setup.contract("demo.yaml", &stdout(&init));

    let check = run_with(&setup, "check", &["--offline", "--json"], &[]);
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    let report: Value = serde_json::from_str(&stdout(&check)).expect("JSON report");
    let warnings = report["warnings"].to_string();
    for var in [CALLER_KEY, PG_PASSWORD, OTHER_TOKEN] {
        assert!(warnings.contains(var), "no warning names {var}: {report:#}");
    }
    // Online, `check` contacts the other upstream: its token is needed then.
    let online = run_with(&setup, "check", &[], &[]);
    assert_eq!(online.status.code(), Some(2), "{online:?}");
    assert!(stderr(&online).contains(OTHER_TOKEN), "{online:?}");

    let serve = run_with(
        &setup,
        "serve",
        &[],
        &[("NARROWGATE_LISTEN", "127.0.0.1:1")],
    );
    assert_eq!(serve.status.code(), Some(2), "{serve:?}");
    assert!(stderr(&serve).contains("NG_OPS_TEST"), "{serve:?}");
}

/// Two copies of the demo upstream, as `demo` and `demo2`, and a caller allowed everything.
fn two_copies() -> String {
    let one = demo_stdio();
    let second = one
        .lines()
        .skip_while(|l| !l.starts_with("  demo:"))
        .take(3)
        .map(|l| format!("{}\n", l.replace("  demo:", "  demo2:")))
        .collect::<String>();
    format!(
        "{one}{second}callers:\n  - name: ops\n    anonymous: true\n    tools: [\"*\"]\n    resources: [\"*\"]\n    prompts: [\"*\"]\n"
    )
}

/// Proves: `init --prefix` exposes every tool and prompt of a second copy of a server as
/// PREFIX<name> with the upstream's name kept as `upstream_tool`/`upstream_prompt` (and its
/// resources, whose URIs the first copy declares, left commented out), so both copies' files
/// pass `check` unchanged; without the prefix, `check` names every collision in one run.
#[test]
fn a_second_copy_is_scaffolded_with_a_prefix_and_every_collision_is_named() {
    let setup = Setup::new(&two_copies(), &[]);
    let first = run_with(&setup, "init", &["--upstream", "demo"], &[]);
    assert!(first.status.success(), "{first:?}");
    setup.contract("demo.yaml", &stdout(&first));

    let unprefixed = run_with(&setup, "init", &["--upstream", "demo2"], &[]);
    assert!(unprefixed.status.success(), "{unprefixed:?}");
    setup.contract("demo2.yaml", &stdout(&unprefixed));
    let check = run_with(&setup, "check", &["--offline", "--json"], &[]);
    assert_eq!(check.status.code(), Some(2), "{check:?}");
    let report: Value = serde_json::from_str(&stdout(&check)).expect("JSON");
    let errors = report["errors"].as_array().cloned().unwrap_or_default();
    let first_tools = super::contract_tools(&setup, "demo.yaml");
    assert!(first_tools.len() > 3, "{first_tools:?}");
    for tool in &first_tools {
        assert!(
            errors.iter().any(|e| e["error"]
                .as_str()
                .is_some_and(|e| e.contains(&format!("tools.{tool}")))),
            "the collision of `{tool}` is not named: {report:#}"
        );
    }
    let text = stderr(&run_with(&setup, "check", &["--offline"], &[]));
    assert!(
        text.matches("is already declared in").count() >= first_tools.len(),
        "{text}"
    );

    let prefixed = run_with(
        &setup,
        "init",
        &["--upstream", "demo2", "--prefix", "d2_"],
        &[],
    );
    assert!(prefixed.status.success(), "{prefixed:?}");
    let text = stdout(&prefixed);
    assert!(
        text.contains("d2_echo:\n    upstream_tool: \"echo\""),
        "{text}"
    );
    setup.contract("demo2.yaml", &text);
    let check = run_with(&setup, "check", &["--json"], &[]);
    let report: Value = serde_json::from_str(&stdout(&check)).expect("JSON");
    assert_eq!(check.status.code(), Some(0), "{report:#}\n{text}");
    for tool in &first_tools {
        let row = tool_row(&report, &format!("d2_{tool}"));
        assert_eq!(row["upstream"], "demo2", "{row}");
        assert_eq!(row["upstream_tool"], tool.as_str(), "{row}");
        assert_eq!(row["status"], "enabled", "{row}");
        assert_eq!(row["pin"], "matches", "{row}");
    }

    let bad = run_with(
        &setup,
        "init",
        &["--upstream", "demo2", "--prefix", "d 2"],
        &[],
    );
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(stderr(&bad).contains("--prefix"), "{bad:?}");
}

/// A stdio upstream that dies at start, saying why on stderr first.
fn dying_upstream() -> String {
    "upstreams:\n  git:\n    command: sh\n    args: [-c, 'echo starting >&2; echo \"fatal: /srv/repo is not a git repository\" >&2; exit 3']\n"
        .to_string()
}

/// Proves: an upstream that fails to start is reported with the last lines of its stderr, by
/// `check` (its reason) and by a running gateway (`/readyz`), not only as a failed handshake.
#[test]
fn an_upstream_that_fails_to_start_is_reported_with_its_stderr() {
    let why = "fatal: /srv/repo is not a git repository";
    let setup = Setup::new(&dying_upstream(), &[]);
    let check = run_with(&setup, "check", &["--json"], &[]);
    assert_eq!(check.status.code(), Some(1), "{check:?}");
    let report: Value = serde_json::from_str(&stdout(&check)).expect("JSON");
    let reason = report["upstreams"][0]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains(why) && reason.contains("starting"),
        "{report:#}"
    );
    assert!(report["problems"].to_string().contains(why), "{report:#}");

    let gateway = Gateway::start(&dying_upstream(), &[]);
    gateway.wait_for(
        Duration::from_secs(30),
        "the upstream's stderr in /readyz",
        |r| r.to_string().contains(why),
    );
    gateway.wait_for_log(Duration::from_secs(10), "the stderr in the log", |log| {
        log.contains(why)
    });
}

/// Proves: `receipts` and `approvals` need only the parts of the configuration they read (the
/// receipts database; where the gateway listens), not the callers' keys: with one unset they get
/// past the configuration to their own work (no database yet; no gateway running) instead of
/// refusing to load it.
#[test]
fn receipts_and_approvals_need_no_callers_keys() {
    let config = format!(
        "callers:\n  - name: ci-bot\n    api_key_env: {CALLER_KEY}\n    tools: [\"*\"]\nreceipts:\n  path: data/receipts.db\nlisten: 127.0.0.1:1\n"
    );
    let setup = Setup::new(&config, &[]);
    let receipts = run_with(&setup, "receipts", &["--json"], &[]);
    assert_eq!(receipts.status.code(), Some(1), "{receipts:?}");
    assert!(
        stderr(&receipts).contains("no receipts database"),
        "{receipts:?}"
    );
    let approvals = run_with(
        &setup,
        "approvals",
        &["list"],
        &[("NARROWGATE_API_KEY", "an-approvers-key")],
    );
    assert_eq!(approvals.status.code(), Some(1), "{approvals:?}");
    assert!(
        stderr(&approvals).contains("cannot reach the gateway at http://127.0.0.1:1"),
        "{approvals:?}"
    );
}
