//! The operator commands `check`, `init` and `hash-key`, run as the real binary on configurations
//! written to temporary folders, against the repository's demo upstream and real third-party MCP
//! servers (`@modelcontextprotocol/server-everything`, `@modelcontextprotocol/server-filesystem`,
//! and a Python SDK server with tool names that clients cannot use; see `cli/init_round_trip.rs`).

use crate::common;

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};

use common::{ConfigDir, demo_stdio_config, free_port};
use serde_json::{Value, json};

/// Runs `narrowgate ARGS`, feeding `stdin` when given.
fn narrowgate(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args(args)
        .env_remove("NARROWGATE_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start narrowgate");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("write stdin");
    }
    drop(input);
    child.wait_with_output().expect("narrowgate runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A configuration file and its `contracts/` folder in a temporary directory (a
/// [`ConfigDir`], which it derefs to), and the commands run on it.
struct Setup(ConfigDir);

impl std::ops::Deref for Setup {
    type Target = ConfigDir;

    fn deref(&self) -> &ConfigDir {
        &self.0
    }
}

impl Setup {
    /// `config` is the YAML after `contracts: contracts`; `contracts` are (file, YAML) pairs.
    fn new(config: &str, contracts: &[(&str, &str)]) -> Setup {
        Setup(ConfigDir::new(config, contracts))
    }

    /// `narrowgate CMD --config FILE EXTRA...`
    fn run(&self, cmd: &str, extra: &[&str]) -> Output {
        let config = self.config();
        let mut args = vec![cmd, "--config", config.to_str().expect("utf-8 path")];
        args.extend_from_slice(extra);
        narrowgate(&args, None)
    }

    /// `check --json`: exit code and the parsed report.
    fn check_json(&self, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        let out = self.run("check", &args);
        let report: Value = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| {
            panic!("check --json is not JSON ({e}): {out:?}");
        });
        (out.status.code().expect("exit code"), report)
    }
}

/// The demo upstream over stdio as `demo`, no callers.
fn demo_stdio() -> String {
    demo_stdio_config("", "")
}

/// The string at `field` of `value` ("" when there is none: every check on it then fails).
fn str_at<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field].as_str().unwrap_or_default()
}

fn tool_row<'a>(report: &'a Value, tool: &str) -> &'a Value {
    report["tools"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["tool"] == tool))
        .unwrap_or_else(|| panic!("no row for {tool} in {report:#}"))
}

/// A weather contract over the demo upstream's `weather` (enum New York, Chicago, Los Angeles).
fn weather(name: &str, cities: &str, extra: &str) -> String {
    format!(
        "upstream: demo\ntools:\n  {name}:\n    upstream_tool: weather\n    privilege: read\n{extra}    input:\n      type: object\n      properties:\n        location: {{ type: string, enum: [{cities}] }}\n      required: [location]\n      additionalProperties: false\n"
    )
}

/// Proves: a contract narrower than its upstream passes `check` with exit 0, verdict `narrower`,
/// and the upstream digest to pin, in the table and in the JSON.
#[test]
fn check_accepts_a_narrower_contract() {
    let setup = Setup::new(&demo_stdio(), &[("w.yaml", &weather("w", "Chicago", ""))]);
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 0, "{report:#}");
    let row = tool_row(&report, "w");
    assert_eq!(row["status"], "enabled");
    assert_eq!(row["narrowing"]["verdict"], "narrower");
    assert_eq!(row["pin"], "unpinned");
    let d = str_at(row, "upstream_digest");
    assert!(d.starts_with("sha256:") && d.len() == 71, "{row}");
    assert_eq!(report["ok"], true);
    let table = setup.run("check", &[]);
    assert_eq!(table.status.code(), Some(0));
    let text = stdout(&table);
    assert!(
        text.contains("narrower") && text.contains("ok: no problems found"),
        "{text}"
    );
}

/// Proves: a contract admitting values the upstream rejects fails `check` with exit 1 and the
/// schema path where it is wider, both where the schema algebra decides it (a larger enum) and
/// where only a concrete counterexample shows it (a property the upstream does not accept).
#[test]
fn check_names_the_path_where_a_contract_is_wider() {
    let extra_property = "upstream: demo\ntools:\n  units:\n    upstream_tool: weather\n    input:\n      type: object\n      properties:\n        location: { type: string, enum: [Chicago] }\n        units: { type: string }\n      required: [location]\n      additionalProperties: false\n";
    let setup = Setup::new(
        &demo_stdio(),
        &[
            ("w.yaml", &weather("w", "Chicago, Paris", "")),
            ("u.yaml", extra_property),
        ],
    );
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 1, "{report:#}");
    let row = tool_row(&report, "w");
    assert_eq!(
        row["narrowing"],
        json!({"verdict": "wider", "path": "/properties/location", "reason": null})
    );
    assert_eq!(
        tool_row(&report, "units")["narrowing"]["path"],
        "/properties/units"
    );
    let problems = report["problems"].to_string();
    assert!(
        problems.contains("wider") && problems.contains("/properties/location"),
        "{problems}"
    );
    let table = stdout(&setup.run("check", &[]));
    assert!(table.contains("WIDER at /properties/location"), "{table}");
    assert!(table.contains("WIDER at /properties/units"), "{table}");
}

/// Proves: a contract that admits no argument the upstream accepts is reported `empty`, the tool
/// disabled, exit 1.
#[test]
fn check_reports_an_empty_intersection() {
    let setup = Setup::new(&demo_stdio(), &[("w.yaml", &weather("w", "Paris", ""))]);
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 1, "{report:#}");
    let row = tool_row(&report, "w");
    assert_eq!(row["narrowing"]["verdict"], "empty");
    assert_eq!(row["status"], "disabled");
    assert!(stdout(&setup.run("check", &[])).contains("EMPTY"));
}

/// Proves: a contract `output` that contradicts the upstream's outputSchema (the demo's `add`
/// promises a number `sum`) is reported with an `empty` output verdict, the tool disabled,
/// exit 1; a compatible one is `narrower` with exit 0.
#[test]
fn check_proves_or_refuses_the_output_side() {
    let add = |sum: &str| {
        format!(
            "upstream: demo\ntools:\n  add:\n    privilege: read\n    input: {{type: object, properties: {{a: {{type: number}}, b: {{type: number}}}}, required: [a, b], additionalProperties: false}}\n    output: {{type: object, properties: {{sum: {sum}}}, required: [sum]}}\n"
        )
    };
    let setup = Setup::new(&demo_stdio(), &[("a.yaml", &add("{type: string}"))]);
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 1, "{report:#}");
    let row = tool_row(&report, "add");
    assert_eq!(row["output_narrowing"]["verdict"], "empty", "{row}");
    assert_eq!(row["status"], "disabled", "{row}");
    assert!(
        report["problems"].to_string().contains("outputSchema"),
        "{report:#}"
    );

    let setup = Setup::new(
        &demo_stdio(),
        &[("a.yaml", &add("{type: number, maximum: 10}"))],
    );
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        tool_row(&report, "add")["output_narrowing"]["verdict"],
        "narrower"
    );
}

/// Proves: a misspelt JSON Schema keyword in a contract (which validators would ignore, losing
/// its constraint) is unusable input: exit 2 naming the file, the key path and the keyword meant.
#[test]
fn check_refuses_a_misspelt_schema_keyword() {
    let setup = Setup::new(
        &demo_stdio(),
        &[(
            "w.yaml",
            &weather("w", "Chicago", "")
                .replace("enum: [Chicago]", "enum: [Chicago], maxLenght: 3"),
        )],
    );
    let out = setup.run("check", &["--offline"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("w.yaml")
            && err.contains("tools.w.input.properties.location.maxLenght")
            && err.contains("did you mean `maxLength`?"),
        "{err}"
    );
}

/// Proves: a contract naming an upstream tool that does not exist, or an upstream that is not
/// configured, is reported disabled with the reason, exit 1.
#[test]
fn check_reports_missing_upstream_tools_and_upstreams() {
    let setup = Setup::new(
        &demo_stdio(),
        &[
            (
                "gone.yaml",
                "upstream: demo\ntools:\n  gone:\n    upstream_tool: no_such_tool\n",
            ),
            ("orphan.yaml", "upstream: nowhere\ntools:\n  orphan: {}\n"),
        ],
    );
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 1, "{report:#}");
    let gone = tool_row(&report, "gone");
    assert_eq!(gone["status"], "disabled");
    let r = str_at(gone, "reason");
    assert!(r.contains("no tool `no_such_tool`"), "{gone}");
    let orphan = tool_row(&report, "orphan");
    assert_eq!(orphan["status"], "disabled");
    let r = str_at(orphan, "reason");
    assert!(r.contains("`nowhere` is not configured"), "{orphan}");
    assert_eq!(
        report["problems"].as_array().map(Vec::len),
        Some(2),
        "{report:#}"
    );
}

/// Proves: the digest `check` prints, put into `pin`, makes the pin match (exit 0); any other
/// pin is reported `mismatch` with the tool disabled (exit 1).
#[test]
fn check_verifies_pins() {
    let setup = Setup::new(&demo_stdio(), &[("w.yaml", &weather("w", "Chicago", ""))]);
    let (_, report) = setup.check_json(&[]);
    let digest = tool_row(&report, "w")["upstream_digest"]
        .as_str()
        .expect("digest")
        .to_string();

    setup.contract(
        "w.yaml",
        &weather("w", "Chicago", &format!("    pin: {digest}\n")),
    );
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(tool_row(&report, "w")["pin"], "matches");

    let wrong = format!("sha256:{}", "0".repeat(64));
    setup.contract(
        "w.yaml",
        &weather("w", "Chicago", &format!("    pin: {wrong}\n")),
    );
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 1, "{report:#}");
    let row = tool_row(&report, "w");
    assert_eq!(row["pin"], "mismatch");
    assert_eq!(row["pinned"], wrong.as_str());
    assert_eq!(row["upstream_digest"], digest.as_str());
    assert_eq!(row["status"], "disabled");
    let r = str_at(row, "reason");
    assert!(r.starts_with("pin mismatch"), "{row}");
    let table = stdout(&setup.run("check", &[]));
    assert!(
        table.contains("mismatch") && table.contains(&digest),
        "{table}"
    );
}

/// Proves: an upstream that cannot be reached is reported down, its tools unavailable, exit 1.
#[test]
fn check_reports_an_unreachable_upstream() {
    let config = format!(
        "upstreams:\n  far:\n    url: http://127.0.0.1:{}/mcp\n",
        free_port()
    );
    let setup = Setup::new(&config, &[("f.yaml", "upstream: far\ntools:\n  t: {}\n")]);
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(report["upstreams"][0]["state"], "down");
    assert!(report["upstreams"][0]["reason"].is_string());
    assert_eq!(tool_row(&report, "t")["status"], "unavailable");
}

/// Proves: unusable input exits 2 with a message naming the file, the key and what is wrong:
/// an unknown configuration key, an unknown contract key, an unset `${VAR}`, a missing file. The
/// hint under a bad key points at that kind of file's documentation and schema, not elsewhere.
#[test]
fn check_refuses_unusable_input_with_exit_2() {
    let setup = Setup::new(&format!("listn: 127.0.0.1:1\n{}", demo_stdio()), &[]);
    let out = setup.run("check", &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("narrowgate.yaml") && err.contains("listn") && err.contains("unknown field"),
        "{err}"
    );
    assert!(
        err.contains("docs/configuration.md") && err.contains("narrowgate schema config"),
        "{err}"
    );
    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 2);
    assert_eq!(report["ok"], false);
    let e = str_at(&report, "error");
    assert!(e.contains("listn"), "{report}");

    let setup = Setup::new(
        &demo_stdio(),
        &[(
            "typo.yaml",
            "upstream: demo\ntools:\n  t:\n    privlege: read\n",
        )],
    );
    let out = setup.run("check", &["--offline"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("typo.yaml") && err.contains("tools.t") && err.contains("privlege"),
        "{err}"
    );
    assert!(
        err.contains("docs/contracts.md") && err.contains("narrowgate schema contract"),
        "{err}"
    );

    let setup = Setup::new(
        "upstreams:\n  w:\n    url: http://127.0.0.1:1/mcp\n    headers: { Authorization: \"Bearer ${NARROWGATE_TEST_UNSET_VAR}\" }\n",
        &[],
    );
    let out = setup.run("check", &[]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        stderr(&out).contains("NARROWGATE_TEST_UNSET_VAR"),
        "{out:?}"
    );

    let out = narrowgate(&["check", "--config", "/nonexistent/narrowgate.yaml"], None);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("--config"), "{out:?}");
}

/// Proves: `--offline` starts no upstream (a stdio upstream that leaves a marker file when
/// started leaves none) and still checks the files (exit 0); the same configuration online
/// does start it, so the marker proves something.
#[test]
fn check_offline_contacts_no_upstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let marker = dir.path().join("started");
    let config = format!(
        "upstreams:\n  probe:\n    command: sh\n    args: [-c, 'touch \"{}\"']\n",
        marker.display()
    );
    let setup = Setup::new(&config, &[("p.yaml", "upstream: probe\ntools:\n  t: {}\n")]);
    let (code, report) = setup.check_json(&["--offline"]);
    assert_eq!(code, 0, "{report:#}");
    assert!(!marker.exists(), "--offline started the upstream");
    assert_eq!(report["offline"], true);
    assert_eq!(report["upstreams"][0]["state"], "not_contacted");
    assert_eq!(tool_row(&report, "t")["status"], "loaded");

    let (code, report) = setup.check_json(&[]);
    assert_eq!(code, 1, "{report:#}");
    assert!(marker.exists(), "online check did not start the upstream");
}

/// Proves: `--json` is one JSON object whose documented fields are present in every row (null
/// when not applicable), so CI scripts can rely on them.
#[test]
fn check_json_has_stable_fields() {
    let setup = Setup::new(
        &demo_stdio(),
        &[
            ("w.yaml", &weather("w", "Chicago", "")),
            ("orphan.yaml", "upstream: nowhere\ntools:\n  orphan: {}\n"),
        ],
    );
    for extra in [&[][..], &["--offline"][..]] {
        let (_, report) = setup.check_json(extra);
        for key in [
            "ok",
            "offline",
            "config",
            "contracts",
            "problems",
            "warnings",
            "upstreams",
            "tools",
        ] {
            assert!(report.get(key).is_some(), "missing {key}: {report:#}");
        }
        for row in report["upstreams"].as_array().expect("upstreams") {
            for key in [
                "name",
                "transport",
                "state",
                "reason",
                "tools",
                "without_contract",
            ] {
                assert!(row.get(key).is_some(), "upstream row lacks {key}: {row}");
            }
        }
        let rows = report["tools"].as_array().expect("tools");
        assert_eq!(rows.len(), 2);
        for row in rows {
            for key in [
                "tool",
                "upstream",
                "upstream_tool",
                "file",
                "status",
                "reason",
                "narrowing",
                "output_narrowing",
                "pin",
                "pinned",
                "upstream_digest",
            ] {
                assert!(row.get(key).is_some(), "tool row lacks {key}: {row}");
            }
        }
    }
}

/// Proves: a reader that stops after a few bytes (`narrowgate check --json | head -c 10`) ends
/// the output quietly: no panic, no error message, the check's own exit status; the table too.
#[test]
fn check_into_a_pipe_closed_early_exits_quietly() {
    // So many tools that the report outgrows a pipe's buffer (64 KiB on Linux): the command is
    // still writing when the reader goes away, whatever the timing.
    let contracts: Vec<(String, String)> = (0..1000)
        .map(|i| {
            let name = format!("w{i}");
            (format!("{name}.yaml"), weather(&name, "Chicago", ""))
        })
        .collect();
    let contracts: Vec<(&str, &str)> = contracts
        .iter()
        .map(|(file, text)| (file.as_str(), text.as_str()))
        .collect();
    let setup = Setup::new(&demo_stdio(), &contracts);
    let config = setup.config();
    for extra in [&["--json"][..], &[][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_narrowgate"))
            .args(["check", "--config"])
            .arg(&config)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start narrowgate check");
        let mut report = child.stdout.take().expect("stdout");
        let mut first = [0u8; 10];
        report.read_exact(&mut first).expect("the report starts");
        drop(report);
        let out = child.wait_with_output().expect("narrowgate runs");
        let errors = stderr(&out);
        assert!(!errors.contains("panicked"), "{extra:?}: {errors}");
        assert_ne!(out.status.code(), Some(101), "{extra:?}: {errors}");
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {errors}");
        assert!(errors.is_empty(), "{extra:?}: {errors}");
    }
}

/// Proves: `hash-key KEY` and `hash-key` with the key on stdin (trailing newline stripped) both
/// print sha256 of the key; an empty key is refused.
#[test]
fn hash_key_takes_the_key_as_argument_or_on_stdin() {
    const FOO: &str = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
    let out = narrowgate(&["hash-key", "foo"], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out), format!("{FOO}\n"));
    for input in ["foo\n", "foo"] {
        let out = narrowgate(&["hash-key"], Some(input));
        assert!(out.status.success(), "{out:?}");
        assert_eq!(stdout(&out).trim(), FOO, "stdin {input:?}");
    }
    let out = narrowgate(&["hash-key"], Some("\n"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// Proves: every command's `--help` shows an example.
#[test]
fn every_command_has_help_with_an_example() {
    for cmd in ["serve", "check", "init", "receipts", "hash-key"] {
        let out = narrowgate(&[cmd, "--help"], None);
        assert!(out.status.success(), "{cmd}: {out:?}");
        let text = stdout(&out);
        assert!(
            text.contains("Example") && text.contains(&format!("narrowgate {cmd}")),
            "{cmd} --help has no example:\n{text}"
        );
    }
}

/// Proves: `init` for an unknown upstream exits 2 naming the configured ones; for an upstream
/// that cannot start, exits 1 saying which entry to check.
#[test]
fn init_explains_a_wrong_upstream() {
    let config = format!(
        "{}  broken:\n    command: /nonexistent/mcp-server\n",
        demo_stdio()
    );
    let setup = Setup::new(&config, &[]);
    let out = setup.run("init", &["--upstream", "nope"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("broken, demo"), "{out:?}");
    let out = setup.run("init", &["--upstream", "broken"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr(&out).contains("upstreams.broken"), "{out:?}");
}

#[path = "cli/init_round_trip.rs"]
mod init_round_trip;

#[path = "cli/operators.rs"]
mod operators;

/// The exposed tool names in contract file `file` of `setup` (for `operators`).
fn contract_tools(setup: &Setup, file: &str) -> Vec<String> {
    let path = setup.dir.path().join("contracts").join(file);
    let text = std::fs::read_to_string(&path).expect("contract file");
    let parsed: Value = serde_saphyr::from_str(&text).expect("YAML");
    parsed["tools"]
        .as_object()
        .map(|tools| tools.keys().cloned().collect())
        .unwrap_or_default()
}
