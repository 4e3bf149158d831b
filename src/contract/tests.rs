use super::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).expect("write contract");
}

#[test]
fn defaults_follow_privilege_and_names_default_to_the_exposed_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "w.yaml",
        "upstream: weather\ntools:\n  get_weather:\n    privilege: read\n    input: {type: object}\n  delete_all:\n    input: {type: object}\n",
    );
    let set = ContractSet::load_dir(dir.path()).expect("loads");
    let read = &set.tools["get_weather"];
    assert_eq!(
        (read.idempotent, read.side_effects),
        (true, SideEffects::None)
    );
    assert_eq!(read.upstream_tool, "get_weather");
    let write = &set.tools["delete_all"];
    assert_eq!(
        (write.privilege, write.idempotent, write.side_effects),
        (Privilege::Write, false, SideEffects::Irreversible)
    );
}

#[test]
fn duplicate_names_across_files_name_both_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "a.yaml",
        "upstream: a\ntools:\n  t: {input: {type: object}}\n",
    );
    write(
        dir.path(),
        "b.yaml",
        "upstream: b\ntools:\n  t: {input: {type: object}}\n",
    );
    let e = ContractSet::load_dir(dir.path()).unwrap_err().to_string();
    assert!(
        e.contains("a.yaml") && e.contains("b.yaml") && e.contains("tools.t"),
        "{e}"
    );
}

/// Proves a URI two upstreams both expose (the same URI, or one upstream's exact URI inside
/// another's glob) and a prompt declared twice are load errors naming both files.
#[test]
fn duplicate_resources_and_prompts_name_both_files() {
    let cases = [
        (
            "upstream: a\nresources:\n  - uri: test://x\n",
            "upstream: b\nresources:\n  - uri: test://x\n",
            "resources.0",
        ),
        (
            "upstream: a\nresources:\n  - uri: 'test://*'\n",
            "upstream: b\nresources:\n  - uri: test://x\n",
            "resources.0",
        ),
        (
            "upstream: a\nprompts:\n  p: {}\n",
            "upstream: b\nprompts:\n  p: {}\n",
            "prompts.p",
        ),
    ];
    for (a, b, key) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "a.yaml", a);
        write(dir.path(), "b.yaml", b);
        let e = ContractSet::load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains("a.yaml") && e.contains("b.yaml") && e.contains(key),
            "{e}"
        );
    }
}

/// Proves malformed resource and prompt entries are refused with their key.
#[test]
fn invalid_resources_and_prompts_are_refused_with_the_key() {
    let cases = [
        (
            "upstream: a\nresources:\n  - description: x\n",
            "resources.0",
        ),
        (
            "upstream: a\nresources:\n  - uri_template: 't://{id}'\n",
            "resources.0.variables",
        ),
        (
            "upstream: a\nresources:\n  - uri_template: 't://{id}'\n    variables: {id: {pattern: '('}}\n",
            "resources.0.variables.id",
        ),
        (
            "upstream: a\nresources:\n  - uri: t://x\n    mime_type: [a]\n",
            "unknown field `mime_type`",
        ),
        (
            "upstream: a\nprompts:\n  p: {arguments: {x: {pattern: '['}}}\n",
            "prompts.p.arguments.x",
        ),
        (
            "upstream: a\nprompts:\n  'bad name': {}\n",
            "prompts.bad name",
        ),
    ];
    for (text, expected) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "c.yaml", text);
        let e = ContractSet::load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(expected) && e.contains("c.yaml"),
            "{text:?} gave {e}"
        );
    }
}

#[test]
fn invalid_contracts_are_refused_with_the_key() {
    let cases = [
        ("tools:\n  t: {input: {type: object}}\n", "upstream"),
        (
            "upstream: a\ntools:\n  t: {input: {type: string}}\n",
            "tools.t.input",
        ),
        (
            "upstream: a\ntools:\n  t: {input: {type: object, properties: {x: {type: strng}}}}\n",
            "tools.t.input",
        ),
        (
            "upstream: a\ntools:\n  t: {privilege: write, retries: 2}\n",
            "tools.t.retries",
        ),
        ("upstream: a\ntools:\n  t: {pin: abc}\n", "tools.t.pin"),
        (
            "upstream: a\ntools:\n  t: {redact: [token]}\n",
            "tools.t.redact.0",
        ),
        ("upstream: a\ntools:\n  'bad name': {}\n", "tools.bad name"),
        (
            "upstream: a\ntools:\n  t: {privlege: read}\n",
            "unknown field `privlege`",
        ),
        (
            "upstream: a\ntools:\n  t: {timeout: 5}\n",
            "tools.t.timeout",
        ),
        // A misspelt keyword would be ignored by validators: its constraint silently lost.
        (
            "upstream: a\ntools:\n  t: {input: {type: object, properties: {s: {type: string, maxLenght: 3}}}}\n",
            "tools.t.input.properties.s.maxLenght",
        ),
        (
            "upstream: a\ntools:\n  t: {output: {type: object, properties: {k: {enun: [a]}}}}\n",
            "did you mean `enum`?",
        ),
        (
            "upstream: a\ntools:\n  t: {input: {type: object, x-note: hi}}\n",
            "tools.t.input.x-note",
        ),
    ];
    for (text, expected) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "c.yaml", text);
        let e = ContractSet::load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            e.contains(expected) && e.contains("c.yaml"),
            "{text:?} gave {e}"
        );
    }
}

/// Proves: a fallback must name another read tool of the set: one that does not exist, a write,
/// or the tool itself is refused at load (the tool, not the whole set), naming the key; a valid
/// fallback, possibly in another file, loads.
#[test]
fn fallbacks_name_another_read_tool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tool = |name: &str, privilege: &str, fallback: &str| {
        format!(
            "  {name}:\n    privilege: {privilege}\n    on_error: {{types: [unavailable], fallback: {fallback}}}\n"
        )
    };
    write(
        dir.path(),
        "a.yaml",
        &format!(
            "upstream: a\ntools:\n{}{}{}  writer:\n    privilege: write\n",
            tool("good", "read", "mirror"),
            tool("to_nothing", "read", "no_such_tool"),
            tool("to_itself", "read", "to_itself"),
        ),
    );
    write(
        dir.path(),
        "b.yaml",
        &format!(
            "upstream: b\ntools:\n  mirror:\n    privilege: read\n{}",
            tool("to_write", "read", "writer")
        ),
    );
    let (set, errors) = ContractSet::load_dir_all(dir.path());
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 3, "{text:#?}");
    for (name, why) in [
        ("to_nothing", "not a tool"),
        ("to_itself", "its own fallback"),
        ("to_write", "not a read tool"),
    ] {
        assert!(
            text.iter()
                .any(|e| e.contains(&format!("tools.{name}.on_error.fallback")) && e.contains(why)),
            "{name}: {text:#?}"
        );
        assert!(!set.tools.contains_key(name), "{name} is refused");
    }
    assert!(set.tools.contains_key("good") && set.tools.contains_key("mirror"));
}
