//! The library for the npm servers: filesystem, memory, postgres, everything. Each test puts the
//! shipped read-only and read-write files (read with `library_file`, `${VAR}`s given to the
//! gateway's environment as a user would) in front of the pinned server, and proves the reads
//! answer, the left-out tools are unknown, the narrowed arguments and the attacks are refused,
//! and the server's state (the folder, the memory file, the database) is unchanged.

use std::time::Duration;

use serde_json::{Value, json};

use super::library_file;
use crate::common::peers::node_bin;
use crate::common::{Gateway, Postgres};
use crate::peers::real_servers::{
    Stdio, assert_refused, assert_unknown_tool, call, py2_through, snapshot,
};

/// A gateway serving `server` with the library file `profile` of `library` (as `LIB.yaml`),
/// `env` in its environment, every tool joined.
fn serve_library(server: &Stdio, library: &str, profile: &str, env: &[(&str, &str)]) -> Gateway {
    let contract = library_file(library, profile);
    let file = format!("{library}.yaml");
    let gw = Gateway::spawn(&server.config(), &[(&file, &contract)], env);
    let port = gw.base.rsplit(':').next().expect("port").to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "gateway not listening:\n{}",
            gw.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    gw.wait_for(Duration::from_secs(60), "the library's tools joined", |r| {
        let tools = r["tools"].as_object();
        let joined =
            tools.is_some_and(|t| !t.is_empty() && t.values().all(|t| t["state"] != "unavailable"));
        r["upstreams"][server.name]["state"] == "up" && joined
    });
    gw
}

/// Asserts a call answered (no error) and its text contains `expected`.
#[track_caller]
fn answered(result: &Value, expected: &str, gw: &Gateway) {
    assert_eq!(result["is_error"], false, "{result}\n{}", gw.log());
    assert!(
        result.to_string().contains(expected),
        "{expected} not in {result}"
    );
}

/// Asserts a call was refused (a tool error or a JSON-RPC error) and leaked nothing of `secret`.
#[track_caller]
fn refused(result: &Value, secret: &str) {
    let refused = result["is_error"] == true || result.get("error").is_some();
    assert!(refused, "not refused: {result}");
    assert!(!result.to_string().contains(secret), "leaked: {result}");
}

/// The tool names a listing step published.
fn names(list: &Value) -> Vec<String> {
    let tools = list["tools"].as_array().into_iter().flatten();
    tools
        .map(|t| t["name"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Proves: the filesystem library files pin the root: reads answer under FILESYSTEM_ROOT; `..`,
/// `~`, hidden names, paths outside the root, oversized head/tail and lists, head with tail are
/// refused; a symlink in the root to a file outside is not read; the write tools are unknown in
/// read-only; in read-write, creating a folder works while an overwrite needs the user's approval
/// (the client gives none: refused) and a move out of the root is refused; no file changes.
#[test]
fn filesystem_library_pins_the_root_and_refuses_traversal_symlinks_and_writes() {
    let dir = tempfile::Builder::new()
        .prefix("ngfs")
        .tempdir()
        .expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical");
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(root.join("docs")).expect("mkdir");
    std::fs::write(root.join("docs/note.txt"), "first line\nsecond line\n").expect("write");
    std::fs::write(root.join(".env"), "HIDDEN-SECRET").expect("write");
    std::fs::write(outside.path().join("secret.txt"), "OUTSIDE-SECRET").expect("write");
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        root.join("docs/link.txt"),
    )
    .expect("symlink");
    let r = root.display().to_string();
    let at = |rel: &str| format!("{r}/{rel}");
    let server = Stdio::new("filesystem", node_bin("mcp-server-filesystem"), &[&r]);
    let env = [("FILESYSTEM_ROOT", r.as_str())];
    let before = snapshot(&root);

    let gw = serve_library(&server, "filesystem", "read-only", &env);
    let many: Vec<String> = (0..11).map(|i| at(&format!("docs/f{i}.txt"))).collect();
    let excludes: Vec<String> = (0..17).map(|i| format!("x{i}")).collect();
    let steps = json!([
        {"op": "list"},
        call("read_text_file", json!({"path": at("docs/note.txt"), "head": 1})),
        call("list_directory", json!({"path": r})),
        call("search_files", json!({"path": r, "pattern": "**/*.txt"})),
        call("read_text_file", json!({"path": at("docs/../../etc/passwd")})),
        call("read_text_file", json!({"path": format!("{}/secret.txt", outside.path().display())})),
        call("read_text_file", json!({"path": "~/.bashrc"})),
        call("read_text_file", json!({"path": at(".env")})),
        call("read_text_file", json!({"path": at("docs/link.txt")})),
        call("read_text_file", json!({"path": at("docs/note.txt"), "head": 5000})),
        call("read_text_file", json!({"path": at("docs/note.txt"), "head": 1, "tail": 1})),
        call("read_multiple_files", json!({"paths": many})),
        call("directory_tree", json!({"path": r, "excludePatterns": excludes})),
        call("write_file", json!({"path": at("docs/note.txt"), "content": "overwritten"})),
        call("read_file", json!({"path": at("docs/note.txt")})),
        call("list_directory", json!({"path": r, "extra": true})),
        call("list_allowed_directories", json!({})),
        call("search_files", json!({"path": r, "pattern": "../**"})),
        call("search_files", json!({"path": r, "pattern": "**/.env"})),
    ]);
    let res = &py2_through(&gw, &steps);
    let listed = names(&res[0]);
    assert!(listed.contains(&"read_text_file".to_string()), "{listed:?}");
    assert!(
        !listed
            .iter()
            .any(|n| n.contains("write") || n == "read_file"),
        "{listed:?}"
    );
    answered(&res[1], "first line", &gw);
    assert!(
        !res[1].to_string().contains("second line"),
        "head ignored: {}",
        res[1]
    );
    answered(&res[2], "docs", &gw);
    answered(&res[3], "note.txt", &gw);
    for escape in &res[4..=8] {
        refused(escape, "SECRET");
    }
    assert_refused(&res[4], "/path", "pattern");
    assert_refused(&res[7], "/path", "pattern");
    assert_refused(&res[9], "/head", "maximum");
    refused(&res[10], "second line");
    assert_refused(&res[11], "/paths", "maxItems");
    assert_refused(&res[12], "/excludePatterns", "maxItems");
    assert_unknown_tool(&res[13], "write_file");
    assert_unknown_tool(&res[14], "read_file");
    refused(&res[15], "note.txt");
    // The server's allowed directories stay the root alone (no client roots replaced them).
    answered(&res[16], &r, &gw);
    let allowed = res[16]["structured_content"]["content"]
        .as_str()
        .unwrap_or("");
    assert_eq!(
        allowed.lines().filter(|l| l.starts_with('/')).count(),
        1,
        "{}",
        res[16]
    );
    assert_refused(&res[17], "/pattern", "not");
    assert_refused(&res[18], "/pattern", "not");
    assert_eq!(snapshot(&root), before, "files changed (read-only)");
    drop(gw);

    let gw = serve_library(&server, "filesystem", "read-write", &env);
    let steps = json!([
        call("create_directory", json!({"path": at("made")})),
        call(
            "write_file",
            json!({"path": at("docs/note.txt"), "content": "overwritten"})
        ),
        call(
            "write_file",
            json!({"path": at("../escaped.txt"), "content": "x"})
        ),
        call(
            "move_file",
            json!({"source": at("docs/note.txt"), "destination": format!("{}/moved.txt", outside.path().display())})
        ),
        call(
            "edit_file",
            json!({"path": at(".env"), "edits": [{"oldText": "HIDDEN", "newText": "x"}]})
        ),
    ]);
    let res = &py2_through(&gw, &steps);
    assert_eq!(res[0]["is_error"], false, "{}\n{}", res[0], gw.log());
    assert!(
        root.join("made").is_dir(),
        "create_directory did not create"
    );
    refused(&res[1], "SECRET");
    assert!(
        res[1].to_string().contains("needs the user's approval"),
        "{}",
        res[1]
    );
    assert_refused(&res[2], "/path", "pattern");
    assert_refused(&res[3], "/destination", "pattern");
    assert_refused(&res[4], "/path", "pattern");
    assert_eq!(snapshot(&root), before, "files changed (read-write)");
    assert!(
        !dir.path()
            .parent()
            .expect("parent")
            .join("escaped.txt")
            .exists()
    );
}

/// Proves: the memory library files read the graph (whole, searched, by name) with bounded
/// queries and counts; read-only knows no tool that writes and the memory file stays byte for
/// byte the same; read-write creates an entity (the file has it), refuses an oversized batch and
/// a deletion the user did not approve, and the entity is still in the file.
#[test]
fn memory_library_reads_bounded_and_deletes_only_with_approval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memory.jsonl");
    let graph = [
        json!({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["likes tea"]}),
        json!({"type": "entity", "name": "Engine", "entityType": "machine", "observations": ["analytical"]}),
        json!({"type": "relation", "from": "Ada", "to": "Engine", "relationType": "programs"}),
    ];
    let lines: Vec<String> = graph.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n") + "\n").expect("write");
    let mut server = Stdio::new("memory", node_bin("mcp-server-memory"), &[]);
    server.env = vec![("MEMORY_FILE_PATH".into(), file.display().to_string())];
    let before = std::fs::read(&file).expect("read");
    let names_21: Vec<String> = (0..21).map(|i| format!("n{i}")).collect();
    let entity =
        |name: &str| json!({"name": name, "entityType": "person", "observations": ["new"]});

    let gw = serve_library(&server, "memory", "read-only", &[]);
    let steps = json!([
        {"op": "list"},
        call("read_graph", json!({})),
        call("search_nodes", json!({"query": "tea"})),
        call("open_nodes", json!({"names": ["Engine"]})),
        call("search_nodes", json!({"query": "x".repeat(201)})),
        call("open_nodes", json!({"names": names_21})),
        call("create_entities", json!({"entities": [entity("Mallory")]})),
        call("delete_entities", json!({"entityNames": ["Ada"]})),
        call("read_graph", json!({"limit": 1})),
    ]);
    let res = &py2_through(&gw, &steps);
    assert_eq!(names(&res[0]).len(), 3, "{}", res[0]);
    answered(&res[1], "Engine", &gw);
    answered(&res[2], "Ada", &gw);
    answered(&res[3], "analytical", &gw);
    assert_refused(&res[4], "/query", "maxLength");
    assert_refused(&res[5], "/names", "maxItems");
    assert_unknown_tool(&res[6], "create_entities");
    assert_unknown_tool(&res[7], "delete_entities");
    refused(&res[8], "Engine");
    assert_eq!(
        std::fs::read(&file).expect("read"),
        before,
        "the graph changed"
    );
    drop(gw);

    let gw = serve_library(&server, "memory", "read-write", &[]);
    let batch: Vec<Value> = (0..21).map(|i| entity(&format!("b{i}"))).collect();
    let steps = json!([
        {"op": "list"},
        call("create_entities", json!({"entities": [entity("Grace")]})),
        call("create_entities", json!({"entities": batch})),
        call("delete_entities", json!({"entityNames": ["Grace", "Ada"]})),
        call("add_observations", json!({"observations": [{"entityName": "Ada", "contents": ["x".repeat(1001)]}]})),
    ]);
    let res = &py2_through(&gw, &steps);
    assert_eq!(names(&res[0]).len(), 9, "{}", res[0]);
    answered(&res[1], "Grace", &gw);
    assert_refused(&res[2], "/entities", "maxItems");
    refused(&res[3], "\"success\":true");
    assert!(
        res[3].to_string().contains("needs the user's approval"),
        "{}",
        res[3]
    );
    assert_refused(&res[4], "/observations/0/contents/0", "maxLength");
    let after = std::fs::read_to_string(&file).expect("read");
    assert!(after.contains("\"Grace\""), "not created: {after}");
    assert!(
        after.contains("\"Ada\"") && after.contains("likes tea"),
        "deleted: {after}"
    );
    assert!(
        !after.contains("\"b0\"") && !after.contains("xxxx"),
        "{after}"
    );
}

/// Proves: the postgres library files (both profiles) run one SELECT and list and read the table
/// schemas, and refuse the read-only escape (`SELECT 1; COMMIT; DROP TABLE …`), comments,
/// `SET`/`COMMIT`/`ROLLBACK`, a writing CTE, effectful functions and oversized SQL: the table
/// keeps its rows.
#[test]
fn postgres_library_runs_one_select_and_refuses_the_escapes() {
    let pg = Postgres::start();
    pg.batch(
        "CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL);
         INSERT INTO notes VALUES (1, 'first'), (2, 'second');",
    );
    let server = Stdio::new("postgres", node_bin("mcp-server-postgres"), &[&pg.url()]);
    let count = || pg.value_in("postgres", "SELECT count(*)::text FROM notes");
    let attacks = [
        "SELECT 1; COMMIT; DROP TABLE notes",
        "SELECT 1;COMMIT;DELETE FROM notes",
        "COMMIT",
        "SELECT 1 -- ; COMMIT",
        "SELECT 1 /* x */ FROM notes",
        "SET transaction_read_only = off",
        "ROLLBACK",
        "WITH gone AS (DELETE FROM notes RETURNING *) SELECT * FROM gone",
        "SELECT set_config('transaction_read_only', 'off', false)",
        "SELECT pg_sleep(600)",
        "SELECT pg_read_file('/etc/passwd')",
        "select 1 from notes for update",
        "SELECT * INTO copied FROM notes",
    ];
    for profile in ["read-only", "read-write"] {
        let gw = serve_library(&server, "postgres", profile, &[]);
        let mut steps = vec![
            call(
                "query",
                json!({"sql": "SELECT id, CASE WHEN id > 1 THEN body END AS late FROM notes ORDER BY id"}),
            ),
            json!({"op": "resources"}),
            json!({"op": "read", "uri": format!("{}/notes/schema", pg.url().trim_end_matches("/postgres"))}),
            call(
                "query",
                json!({"sql": format!("SELECT {}", "1+".repeat(2000))}),
            ),
        ];
        steps.extend(attacks.iter().map(|sql| call("query", json!({"sql": sql}))));
        let res = &py2_through(&gw, &json!(steps));
        answered(&res[0], "second", &gw);
        assert!(res[1].to_string().contains("notes/schema"), "{}", res[1]);
        assert!(res[2].to_string().contains("body"), "{}", res[2]);
        assert_refused(&res[3], "/sql", "maxLength");
        for (i, sql) in attacks.iter().enumerate() {
            assert_eq!(
                res[4 + i]["is_error"],
                true,
                "{profile}: {sql} not refused: {}",
                res[4 + i]
            );
            assert!(
                res[4 + i].to_string().contains("/sql"),
                "{profile}: {sql}: {}",
                res[4 + i]
            );
        }
        assert_eq!(
            count().as_deref(),
            Some("2"),
            "{profile}: the table changed"
        );
    }
}

/// Proves: the everything library files publish the side-effect-free tools (echo, sum, a PNG
/// image, structured weather, a bounded long operation) and not get-env (the server's
/// environment); oversized strings and durations are refused; read-write adds the session toggles
/// and gzip of a data: URI while refusing gzip of an http(s) URL (the server would fetch it).
#[test]
fn everything_library_publishes_the_safe_tools_bounded() {
    let server = Stdio::new("everything", node_bin("mcp-server-everything"), &["stdio"]);
    let gw = serve_library(&server, "everything", "read-only", &[]);
    let steps = json!([
        {"op": "list"},
        call("echo", json!({"message": "hello"})),
        call("get-sum", json!({"a": 2, "b": 3})),
        call("get-tiny-image", json!({})),
        call("get-structured-content", json!({"location": "Chicago"})),
        call("get-env", json!({})),
        call("echo", json!({"message": "x".repeat(1001)})),
        call("trigger-long-running-operation", json!({"duration": 3600, "steps": 1})),
        call("get-sum", json!({"a": 1e12, "b": 1})),
        call("toggle-simulated-logging", json!({})),
    ]);
    let res = &py2_through(&gw, &steps);
    let listed = names(&res[0]);
    assert_eq!(listed.len(), 7, "{listed:?}");
    answered(&res[1], "hello", &gw);
    answered(&res[2], "5", &gw);
    answered(&res[3], "image/png", &gw);
    answered(&res[4], "humidity", &gw);
    assert_unknown_tool(&res[5], "get-env");
    assert_refused(&res[6], "/message", "maxLength");
    assert_refused(&res[7], "/duration", "maximum");
    assert_refused(&res[8], "/a", "maximum");
    assert_unknown_tool(&res[9], "toggle-simulated-logging");
    drop(gw);

    let gw = serve_library(&server, "everything", "read-write", &[]);
    let gzip = |data: &str| {
        call(
            "gzip-file-as-resource",
            json!({"data": data, "name": "a.gz", "outputType": "resource"}),
        )
    };
    let steps = json!([
        {"op": "list"},
        call("toggle-simulated-logging", json!({})),
        gzip("data:text/plain;base64,aGVsbG8="),
        gzip("https://169.254.169.254/latest/meta-data/"),
        gzip("file:///etc/passwd"),
        call("get-env", json!({})),
    ]);
    let res = &py2_through(&gw, &steps);
    assert_eq!(names(&res[0]).len(), 13, "{}", res[0]);
    assert_eq!(res[1]["is_error"], false, "{}\n{}", res[1], gw.log());
    answered(&res[2], "application/gzip", &gw);
    assert_refused(&res[3], "/data", "pattern");
    assert_refused(&res[4], "/data", "pattern");
    assert_unknown_tool(&res[5], "get-env");
}
