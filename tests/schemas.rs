//! What editors and shells get from narrowgate, against the real binary: the JSON Schemas of the
//! configuration and contract files (`narrowgate schema`, checked in under `schemas/` and named by
//! the example files' `# yaml-language-server: $schema=` line) and the completion scripts
//! (`narrowgate completions`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use narrowgate::harness::ContractFile;
use narrowgate::harness::{Config, LoadError, yaml};
use serde_json::Value;

/// The line that points an editor at a file's schema, up to the schema's path.
const SCHEMA_LINE: &str = "# yaml-language-server: $schema=";

/// The example files that must name a schema: every YAML file in these folders, and these files.
const EXAMPLE_DIRS: &[&str] = &["config", "contracts", "bench/contracts", "docker/contracts"];
const EXAMPLE_FILES: &[&str] = &["docker/narrowgate.compose.yaml"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn narrowgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_narrowgate"))
        .args(args)
        .output()
        .expect("narrowgate runs")
}

/// The two kinds of file, with their schema as checked in and the loader's verdict on a text.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Config,
    Contract,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Config => "config",
            Kind::Contract => "contract",
        }
    }

    fn schema_path(self) -> PathBuf {
        repo().join(format!("schemas/{}.schema.json", self.name()))
    }

    fn validator(self) -> jsonschema::Validator {
        let text = std::fs::read_to_string(self.schema_path()).expect("read the checked-in schema");
        let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
        jsonschema::meta::validate(&schema).expect("the schema is a valid JSON Schema");
        jsonschema::validator_for(&schema).expect("the schema compiles")
    }

    /// Reads `text` the way the gateway reads the file (`${VAR}` expanded, unknown keys refused),
    /// without the checks that need the environment or other files.
    fn load(self, path: &Path, text: &str) -> Result<(), LoadError> {
        match self {
            Kind::Config => yaml::parse::<Config>(path, text).map(drop),
            Kind::Contract => yaml::parse::<ContractFile>(path, text).map(drop),
        }
    }
}

/// `text` with every `${NAME}` it reads from the environment set to an example path, as a user's
/// environment would (the library's files read the root or repository they work on).
fn with_example_environment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let inner = &rest[at + 2..];
        let Some(end) = inner.find('}') else { break };
        let name = &inner[..end];
        let variable = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        match variable && !out.ends_with('$') {
            true => out.push_str("/srv/example"),
            false => out.push_str(&rest[at..at + end + 3]),
        }
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The schema's complaints about `text` (YAML), one line each; empty when it is valid.
fn schema_errors(validator: &jsonschema::Validator, text: &str) -> Vec<String> {
    let instance: Value = serde_saphyr::from_str(text).expect("the text is YAML");
    validator
        .iter_errors(&instance)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect()
}

/// Proves: `schemas/config.schema.json` and `schemas/contract.schema.json` are byte for byte what
/// the binary prints (pretty JSON, one trailing newline), so a change to a file's keys without
/// regenerating them fails here, naming the command that regenerates them.
#[test]
fn checked_in_schemas_are_what_the_binary_prints() {
    for kind in [Kind::Config, Kind::Contract] {
        let out = narrowgate(&["schema", kind.name()]);
        assert!(
            out.status.success(),
            "narrowgate schema {}: {}",
            kind.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.ends_with(b"}\n") && !out.stdout.ends_with(b"\n\n"));
        let path = kind.schema_path();
        let checked_in = std::fs::read(&path).unwrap_or_default();
        assert!(
            out.stdout == checked_in,
            "{} is not what `narrowgate schema {kind}` prints: regenerate it (from the repository \
             root) with\n  cargo run -q -- schema {kind} > schemas/{kind}.schema.json",
            path.display(),
            kind = kind.name()
        );
    }
}

/// Every YAML file under `dir` (recursively), skipping build output, installed peers and hidden
/// folders.
fn yaml_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                yaml_files(&path, into);
            }
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            into.push(path);
        }
    }
}

/// The schema a file names on its first line, if it names one of narrowgate's.
fn named_schema(file: &Path, text: &str) -> Option<Kind> {
    let reference = text.lines().next()?.strip_prefix(SCHEMA_LINE)?.trim();
    let target = file.parent()?.join(reference).canonicalize().ok();
    [Kind::Config, Kind::Contract]
        .into_iter()
        .find(|kind| kind.schema_path().canonicalize().ok() == target)
}

/// Proves: every example configuration and contract in the repository names its schema on its
/// first line (so editors validate it), and both the schema and the loader accept it, so the
/// schema does not refuse what the gateway reads, nor the examples drift from either.
#[test]
fn every_example_names_its_schema_and_both_the_schema_and_the_loader_accept_it() {
    let root = repo();
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    files.sort();
    let validators = [Kind::Config.validator(), Kind::Contract.validator()];
    let mut required: Vec<PathBuf> = EXAMPLE_FILES.iter().map(|f| root.join(f)).collect();
    for dir in EXAMPLE_DIRS {
        let mut found = Vec::new();
        yaml_files(&root.join(dir), &mut found);
        assert!(!found.is_empty(), "no YAML files in {dir}");
        required.extend(found);
    }
    let mut checked = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a YAML file");
        let shown = file.strip_prefix(&root).unwrap_or(file).display();
        let Some(kind) = named_schema(file, &text) else {
            assert!(
                !required.contains(file),
                "{shown} must start with `{SCHEMA_LINE}<relative path to schemas/config.schema.json \
                 or schemas/contract.schema.json>`"
            );
            continue;
        };
        let errors = schema_errors(&validators[kind as usize], &text);
        assert!(
            errors.is_empty(),
            "{shown} is refused by the {} schema:\n{}",
            kind.name(),
            errors.join("\n")
        );
        if let Err(e) = kind.load(file, &with_example_environment(&text)) {
            panic!("{shown} is refused by the loader: {e}");
        }
        checked.push(file.clone());
    }
    for file in &required {
        assert!(checked.contains(file), "{} was not checked", file.display());
    }
}

/// Proves: the schemas refuse what the loader refuses (a misspelt key at the top, in an upstream,
/// in a tool; a duration without a unit; a rate of 0; an upstream with both `command` and `url`)
/// and accept what it
/// accepts, `${VAR}` in place of a duration or a rate included, since the loader expands it first.
#[test]
fn the_schemas_refuse_misspelt_keys_and_bad_values_like_the_loader() {
    let config = Kind::Config.validator();
    let contract = Kind::Contract.validator();
    let base_config =
        "listen: 127.0.0.1:8080\nupstreams:\n  demo:\n    command: demo\n    timeout: 10s\n";
    let base_contract = "upstream: demo\ntools:\n  echo:\n    privilege: read\n    rate: 5/m burst 10\n    input: {type: object}\n";
    let refused = [
        (Kind::Config, "listn: 127.0.0.1:8080\n", "listn"),
        (
            Kind::Config,
            "upstreams:\n  demo:\n    comand: demo\n",
            "comand",
        ),
        (
            Kind::Config,
            "upstreams:\n  demo:\n    command: demo\n    timeout: 10\n",
            "timeout",
        ),
        (
            Kind::Contract,
            "upstream: demo\ntools:\n  echo:\n    privlege: read\n",
            "privlege",
        ),
        (
            Kind::Contract,
            "upstream: demo\ntools:\n  echo:\n    rate: 0/s\n",
            "rate",
        ),
    ];
    for (kind, text, expected) in refused {
        let validator = if kind == Kind::Config {
            &config
        } else {
            &contract
        };
        let errors = schema_errors(validator, text).join("\n");
        assert!(
            errors.contains(expected),
            "the {} schema should refuse {text:?} naming `{expected}`, said: {errors:?}",
            kind.name()
        );
        let path = Path::new("test.yaml");
        assert!(
            kind.load(path, text).is_err(),
            "the loader accepts {text:?}"
        );
    }
    // The loader refuses this after parsing (`set either command or url`); editors should too.
    let both = "upstreams:\n  d:\n    command: x\n    url: http://h/mcp\n";
    assert!(
        !schema_errors(&config, both).is_empty(),
        "{both:?} accepted"
    );
    let accepted = [
        (&config, base_config.to_string()),
        (&config, base_config.replace("10s", "${UPSTREAM_TIMEOUT}")),
        (
            &config,
            "max_request_bytes: 4096\nmax_result_bytes: 8 MiB\n".into(),
        ),
        (&contract, base_contract.to_string()),
        (
            &contract,
            base_contract.replace("5/m burst 10", "${ECHO_RATE}"),
        ),
    ];
    for (validator, text) in accepted {
        let errors = schema_errors(validator, &text);
        assert!(errors.is_empty(), "{text:?} refused: {errors:?}");
    }
    for (kind, text) in [(Kind::Config, base_config), (Kind::Contract, base_contract)] {
        kind.load(Path::new("test.yaml"), text)
            .unwrap_or_else(|e| panic!("the loader refuses {text:?}: {e}"));
    }
}

/// Proves: `narrowgate completions bash` prints a bash completion function that knows every
/// subcommand and, loaded into bash, completes `narrowgate sch` to `schema` and its argument to
/// `config`/`contract`; the other shells get a script too, and a shell clap_complete does not
/// support exits 2 naming the supported ones.
#[test]
fn completions_name_the_subcommands_and_refuse_unknown_shells() {
    let out = narrowgate(&["completions", "bash"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(script.contains("_narrowgate()"), "{script}");
    assert!(script.contains("complete -F _narrowgate"), "{script}");
    for sub in [
        "serve",
        "check",
        "init",
        "receipts",
        "hash-key",
        "schema",
        "completions",
    ] {
        assert!(
            script.contains(sub),
            "the bash script does not know `{sub}`"
        );
    }
    assert_eq!(complete_in_bash(&script, &["sch"]), "schema");
    let choices = complete_in_bash(&script, &["schema", ""]);
    assert!(
        choices.contains("config") && choices.contains("contract"),
        "{choices}"
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = narrowgate(&["completions", shell]);
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }

    let out = narrowgate(&["completions", "tcsh"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("invalid value 'tcsh'")
            && stderr.contains("bash, elvish, fish, powershell, zsh"),
        "{stderr}"
    );
}

/// What bash offers, with `script` loaded, for `narrowgate WORDS...` (the last word is the one being
/// completed), as the words of `COMPREPLY` joined by spaces.
fn complete_in_bash(script: &str, words: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("narrowgate.bash");
    std::fs::write(&file, script).expect("write the completion script");
    let previous = if words.len() > 1 {
        words[words.len() - 2]
    } else {
        "narrowgate"
    };
    let out = Command::new("bash")
        .arg("-c")
        .arg(
            r#"source "$1"; shift; COMP_WORDS=(narrowgate "$@"); COMP_CWORD=$#
            COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
            _narrowgate narrowgate "${COMP_WORDS[$COMP_CWORD]}" "$PREVIOUS"; echo "${COMPREPLY[*]}""#,
        )
        .arg("bash")
        .arg(&file)
        .args(words)
        .env("PREVIOUS", previous)
        .output()
        .expect("bash runs (the completion test needs bash on PATH)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
