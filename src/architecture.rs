//! ARCHITECTURE.md stays true: its module table's "uses" column is the code's own module graph,
//! and no two files import each other in a circle.
//!
//! The graph is read from the source as text: a file names another module by a `crate::…` path
//! or by `super::…`. Comment lines and test code (`#[cfg(test)]` modules, `tests.rs` files) are
//! left out: tests may use what they like.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, with its module path (`["edge", "capacity"]`).
fn sources() -> Vec<(PathBuf, Vec<String>)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("src/ is readable")
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files
        .into_iter()
        .filter_map(|path| {
            let relative = path.strip_prefix(&src).ok()?.with_extension("");
            let mut module: Vec<String> = relative
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if module
                .last()
                .is_some_and(|m| m == "mod" || m == "lib" || m == "main")
            {
                module.pop();
            }
            let is_test = module.iter().any(|m| m == "tests" || m == "proptests")
                || module.first().is_some_and(|m| m == "architecture");
            (!is_test).then_some((path, module))
        })
        .collect()
}

/// The file's code without comment lines and without its test module(s).
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file is readable");
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // A test module declared in a file of its own is skipped with its file; an inline
            // one runs to the end of the file (the crate's convention).
            match lines.peek() {
                Some(next) if next.trim_end().ends_with(';') => {
                    lines.next();
                    continue;
                }
                Some(next) if next.trim_start().starts_with("mod ") => break,
                _ => continue,
            }
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The module paths a file's code names: `crate::a::b::…` and `super::…` (resolved), cut to the
/// longest prefix that is a file of the crate.
fn named_modules(
    module: &[String],
    code: &str,
    files: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut named = BTreeSet::new();
    let words: Vec<&str> = code
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| w.contains("::"))
        .collect();
    for word in words {
        let parts: Vec<&str> = word.split("::").filter(|p| !p.is_empty()).collect();
        let mut path: Vec<String> = match parts.first() {
            Some(&"crate") => Vec::new(),
            Some(&"super") => {
                // `super` of `a/b.rs` and of `a/b/mod.rs` alike is `a`.
                let mut base = module.to_vec();
                base.pop();
                base
            }
            _ => continue,
        };
        for part in &parts[1..] {
            if *part == "super" {
                path.pop();
            } else {
                path.push((*part).to_string());
            }
        }
        while !path.is_empty() && !files.contains(&path) {
            path.pop();
        }
        if !path.is_empty() && path != module {
            named.insert(path);
        }
    }
    named
}

/// File → the files it names (a folder's `mod.rs` naming its own children is how Rust modules
/// are built, not an import, and is left out).
fn file_graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let sources = sources();
    let files: BTreeSet<Vec<String>> = sources.iter().map(|(_, m)| m.clone()).collect();
    sources
        .iter()
        .filter(|(_, module)| !module.is_empty())
        .map(|(path, module)| {
            let is_mod_file = path.file_name().is_some_and(|n| n == "mod.rs");
            let named = named_modules(module, &code_of(path), &files)
                .into_iter()
                .filter(|target| !(is_mod_file && target.starts_with(module)))
                .collect();
            (module.clone(), named)
        })
        .collect()
}

/// The "uses" column of ARCHITECTURE.md's module table.
fn documented_arrows() -> BTreeMap<String, BTreeSet<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(path).expect("ARCHITECTURE.md is readable");
    text.lines()
        .skip_while(|line| *line != "## Modules")
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .filter(|line| line.starts_with("| `"))
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            let [module, _owns, uses] = cells.as_slice() else {
                return None;
            };
            let uses = uses
                .split_whitespace()
                .map(|u| u.trim_matches('`').to_string())
                .filter(|u| u != "–")
                .collect();
            Some((module.trim().trim_matches('`').to_string(), uses))
        })
        .collect()
}

/// An arrow between top-level modules that the code has and the table lacks, or the other way
/// round, makes ARCHITECTURE.md wrong: this test fails on either, naming the files.
#[test]
fn the_module_table_lists_every_arrow_between_top_level_modules() {
    let mut code: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, targets) in file_graph() {
        for to in targets {
            if from[0] != to[0] {
                code.entry(from[0].clone())
                    .or_default()
                    .entry(to[0].clone())
                    .or_default()
                    .insert(from.join("::"));
            }
        }
    }
    let documented = documented_arrows();
    let top_level: BTreeSet<String> = file_graph().keys().map(|m| m[0].clone()).collect();
    let mut wrong = Vec::new();
    for module in &top_level {
        let Some(listed) = documented.get(module) else {
            wrong.push(format!(
                "`{module}` has no row in ARCHITECTURE.md's module table"
            ));
            continue;
        };
        let used = code.get(module).cloned().unwrap_or_default();
        for (to, files) in &used {
            if !listed.contains(to) {
                wrong.push(format!(
                    "{module} → {to} (in {files:?}) is not in the table"
                ));
            }
        }
        for to in listed {
            if !used.contains_key(to) {
                wrong.push(format!(
                    "{module} → {to} is in the table but not in the code"
                ));
            }
        }
    }
    for module in documented.keys() {
        if !top_level.contains(module) {
            wrong.push(format!(
                "the table lists `{module}`, which is no module of src/"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md is out of date:\n{}",
        wrong.join("\n")
    );
}

/// `src/lib.rs` declares the modules in the order a request meets them, and ARCHITECTURE.md's
/// table lists them in that same order: a newcomer reading either reads the other.
#[test]
fn lib_rs_and_the_module_table_list_the_modules_in_one_order() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs is readable");
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub(crate) mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .collect();
    let text =
        std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md is readable");
    let table: Vec<&str> = text
        .lines()
        .skip_while(|line| *line != "## Modules")
        .skip(1)
        .take_while(|line| !line.starts_with("## "))
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split('`').next())
        .collect();
    assert!(
        declared.len() > 10,
        "no modules read from src/lib.rs: {declared:?}"
    );
    assert_eq!(
        declared, table,
        "src/lib.rs (left) and ARCHITECTURE.md's module table (right) list the modules in different orders"
    );
}

/// Files that import each other in a circle cannot be read one at a time: the test fails on any
/// circle, between top-level modules or between files, and prints one.
#[test]
fn no_circles_between_modules_or_files() {
    let files = file_graph();
    let mut modules: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in &files {
        for to in targets.iter().filter(|to| to[0] != from[0]) {
            modules
                .entry(from[0].clone())
                .or_default()
                .insert(to[0].clone());
        }
    }
    let files: BTreeMap<String, BTreeSet<String>> = files
        .into_iter()
        .map(|(from, to)| (from.join("::"), to.iter().map(|t| t.join("::")).collect()))
        .collect();
    for graph in [&modules, &files] {
        if let Some(circle) = a_circle(graph) {
            panic!("a circle: {}", circle.join(" → "));
        }
    }
}

/// One circle of `graph`, if it has any (depth-first search, colouring nodes).
fn a_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut circle = path[start..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, done, path) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

/// The reader itself: a circle is found, a `super::` path is resolved to its file.
#[test]
fn the_graph_reader_finds_circles_and_resolves_super() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    assert!(a_circle(&graph).is_some_and(|c| c.len() == 4));
    let files: BTreeSet<Vec<String>> = [vec!["x"], vec!["x", "y"], vec!["x", "z"]]
        .into_iter()
        .map(|m| m.into_iter().map(str::to_string).collect())
        .collect();
    let module = vec!["x".to_string(), "y".to_string()];
    let named = named_modules(&module, "use super::z::Thing;", &files);
    assert_eq!(
        named,
        BTreeSet::from([vec!["x".to_string(), "z".to_string()]])
    );
}
