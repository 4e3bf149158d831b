//! The contract library as the binary carries it: complete, loadable, and renamed faithfully.

use std::collections::BTreeSet;
use std::path::Path;

use super::*;
use crate::contract::ContractSet;

/// A library file's text with each `${VAR}` set, as a user's environment would (the unit tests
/// cannot set the process's environment).
fn with_environment(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let inner = &rest[at + 2..];
        let end = inner.find('}').expect("a closed ${");
        let name = &inner[..end];
        match name.starts_with("caller.") {
            true => out.push_str(&rest[at..at + end + 3]),
            false => out.push_str("/srv/library-test"),
        }
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    out
}

fn load(name: &str, text: &str) -> ContractSet {
    let mut set = ContractSet::default();
    set.add_yaml(Path::new(name), &with_environment(text))
        .unwrap_or_else(|e| panic!("{name} does not load: {e}"));
    set
}

/// Proves: the binary carries exactly the files of contracts/library/ (a file added there but
/// not to `LIBRARY`, or listed but removed, fails here).
#[test]
fn the_binary_carries_every_library_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("contracts/library");
    let mut on_disk = BTreeSet::new();
    for server in std::fs::read_dir(&root).expect("contracts/library") {
        let server = server.expect("entry").path();
        for file in std::fs::read_dir(&server).expect("a server's folder") {
            let file = file.expect("entry").path();
            let name = |p: &Path| p.file_name().and_then(|n| n.to_str()).map(str::to_string);
            let profile = name(&file).expect("a name");
            let profile = profile.strip_suffix(".yaml").expect("only .yaml files");
            on_disk.insert((name(&server).expect("a name"), profile.to_string()));
        }
    }
    let carried: BTreeSet<(String, String)> = LIBRARY
        .iter()
        .map(|f| (f.server.to_string(), f.profile.to_string()))
        .collect();
    assert_eq!(carried, on_disk);
}

/// Proves: every library file loads, names its upstream after its server, records the server it
/// was written for, and gives each tool a pin, its own description and a declared privilege
/// (nothing left to the upstream's texts or to defaults a reviewer did not choose).
#[test]
fn every_library_file_is_complete() {
    for file in LIBRARY {
        let name = format!("{}/{}", file.server, file.profile);
        let set = load(&name, file.text);
        assert!(
            set.written_for.contains_key(file.server),
            "{name}: `upstream: {}` and `written_for:` expected",
            file.server
        );
        assert!(!set.tools.is_empty(), "{name}: no tools");
        for (tool, contract) in &set.tools {
            assert!(contract.pin.is_some(), "{name}: `{tool}` has no pin");
            assert!(
                contract
                    .description
                    .as_deref()
                    .is_some_and(|d| !d.is_empty()),
                "{name}: `{tool}` has no description of its own"
            );
            // The entry's own lines: from `  TOOL:` to the next line indented less than four.
            let declared = format!("  {tool}:");
            let entry: String = file
                .text
                .lines()
                .skip_while(|l| *l != declared)
                .skip(1)
                .take_while(|l| l.starts_with("    ") || l.trim().is_empty())
                .collect::<Vec<_>>()
                .join("\n");
            assert!(
                entry.contains("privilege:"),
                "{name}: `{tool}` does not declare its privilege"
            );
        }
        if file.profile == "read-only" {
            for (tool, contract) in &set.tools {
                assert_eq!(
                    contract.privilege,
                    crate::contract::Privilege::Read,
                    "{name}: `{tool}` is in a read-only profile"
                );
            }
        }
    }
}

/// Proves: `--from-library` for another upstream name and a prefix yields the same contracts
/// under the new names (each keeping the server's tool as `upstream_tool`), with every comment
/// of the reviewed file kept.
#[test]
fn adapted_renames_upstream_and_tools_and_keeps_comments() {
    for file in LIBRARY {
        let name = format!("{}/{}", file.server, file.profile);
        let original = load(&name, file.text);
        let text = adapted(file.text, "work", "w_");
        let renamed = load(&name, &text);
        let comments = |t: &str| {
            t.lines()
                .filter(|l| l.trim_start().starts_with('#'))
                .count()
        };
        assert_eq!(
            comments(&text),
            comments(file.text),
            "{name}: comments lost"
        );
        assert_eq!(renamed.tools.len(), original.tools.len(), "{name}");
        for (tool, contract) in &original.tools {
            let moved = renamed
                .tools
                .get(&format!("w_{tool}"))
                .unwrap_or_else(|| panic!("{name}: `w_{tool}` missing"));
            assert_eq!(moved.upstream, "work");
            assert_eq!(moved.upstream_tool, contract.upstream_tool);
            assert_eq!(moved.input, contract.input, "{name}: `{tool}`");
        }
        assert_eq!(renamed.prompts.len(), original.prompts.len(), "{name}");
        // Without a prefix only the upstream changes.
        let same = load(&name, &adapted(file.text, "work", ""));
        let names = |s: &ContractSet| s.tools.keys().cloned().collect::<Vec<_>>();
        assert_eq!(names(&same), names(&original));
    }
}

/// Proves: an unknown server or profile is refused with what the library has; `SERVER` alone
/// means its read-only profile.
#[test]
fn find_names_what_exists() {
    assert_eq!(find("git").map(|f| f.profile), Ok("read-only"));
    assert_eq!(find("git:read-write").map(|f| f.profile), Ok("read-write"));
    let unknown = find("gti").err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        unknown.contains("no server `gti`") && unknown.contains("git"),
        "{unknown}"
    );
    let profile = find("git:admin")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(profile.contains("read-only, read-write"), "{profile}");
}

/// Proves: `--set NAME=VALUE` writes the value where the file reads `${NAME}`, refuses a name the
/// file does not read (naming those it does) and a value that would change the YAML around it;
/// `${caller.…}` and `$${…}` are not environment references.
#[test]
fn set_writes_values_for_environment_references() {
    let text = "upstream: git\ntools:\n  t:\n    fixed: { repo_path: \"${GIT_REPOSITORY}\", who: \"${caller.name}\", lit: \"$${X}\" }\n";
    assert_eq!(
        environment_references(text),
        vec!["GIT_REPOSITORY".to_string()]
    );
    let set = with_values(text, &["GIT_REPOSITORY=/home/me/src/p".into()]).expect("set");
    assert!(set.contains("repo_path: \"/home/me/src/p\""), "{set}");
    assert!(environment_references(&set).is_empty());
    let not_read = with_values(text, &["HOME=/x".into()]).expect_err("not read");
    assert!(
        not_read.to_string().contains("it reads: GIT_REPOSITORY"),
        "{not_read}"
    );
    for bad in [
        "GIT_REPOSITORY=/a\"b",
        "GIT_REPOSITORY=/a #b",
        "=x",
        "GIT_REPOSITORY",
    ] {
        assert!(with_values(text, &[bad.into()]).is_err(), "{bad}");
    }
}
