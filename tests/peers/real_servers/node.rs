//! The MCP project's npm servers: `server-filesystem`, `server-memory`, `server-postgres` and the
//! MCP Apps example `server-basic-vanillajs`.

use serde_json::{Value, json};

use super::{
    Stdio, assert_refused, assert_unknown_tool, call, compare_through_gateway, init_check_serve,
    py2_through, serve_narrowed, snapshot,
};
use crate::common::peers::node_bin;
use crate::common::{PG_USER, Postgres};
use crate::peers::regex_escape;

/// A 1×1 PNG: what `read_media_file` must hand back as an image block, not as text.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Proves: `server-filesystem`'s init draft passes `check` and serves unchanged; its read tools
/// (a text file's head, an image, a listing, a search) answer every
/// official client as the server does directly, the image as an image block; a contract narrowed
/// to reading `public/` text files refuses writes, edits and moves (unknown tools) and a
/// `public/../private` traversal, and no file changes.
#[test]
fn server_filesystem_serves_as_directly_and_narrowed_refuses_writes_and_traversal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().canonicalize().expect("canonical root");
    std::fs::create_dir_all(root.join("public/img")).expect("mkdir");
    std::fs::create_dir(root.join("private")).expect("mkdir");
    std::fs::write(root.join("public/note.txt"), "public note\nsecond line\n").expect("write");
    std::fs::write(root.join("public/img/dot.png"), PNG).expect("write");
    std::fs::write(root.join("private/secret.txt"), "PRIVATE-SECRET").expect("write");
    let root_text = root.display().to_string();
    let at = |rel: &str| root.join(rel).display().to_string();
    let server = Stdio::new("files", node_bin("mcp-server-filesystem"), &[&root_text]);

    let (gw, _draft) = init_check_serve(&server);
    let steps = [
        json!({"op": "list"}),
        call(
            "read_text_file",
            json!({"path": at("public/note.txt"), "head": 1}),
        ),
        call("read_media_file", json!({"path": at("public/img/dot.png")})),
        call("list_directory", json!({"path": at("public")})),
        call(
            "search_files",
            json!({"path": root_text, "pattern": "**/*.txt"}),
        ),
    ];
    let before = snapshot(&root);
    let differences = compare_through_gateway(&server, &gw, &steps);
    drop(gw);

    let pattern = format!(
        "^{}/public/[A-Za-z0-9_-]{{1,64}}\\.txt$",
        regex_escape(&root_text)
    );
    let input = json!({"type": "object", "properties": {"path": {"type": "string", "pattern": pattern}},
        "required": ["path"], "additionalProperties": false});
    let contract = format!(
        "upstream: files\ntools:\n  read_text_file:\n    description: Read a text file of the public folder.\n    \
         privilege: read\n    input: {input}\n"
    );
    let gw = serve_narrowed(&server, &contract);
    let steps = json!([
        call("read_text_file", json!({"path": at("public/note.txt")})),
        call(
            "read_text_file",
            json!({"path": at("public/../private/secret.txt")})
        ),
        call("read_text_file", json!({"path": at("private/secret.txt")})),
        call(
            "write_file",
            json!({"path": at("public/note.txt"), "content": "overwritten"})
        ),
        call(
            "edit_file",
            json!({"path": at("public/note.txt"), "edits": [{"oldText": "public", "newText": "x"}]})
        ),
        call(
            "move_file",
            json!({"source": at("public/note.txt"), "destination": at("moved.txt")})
        ),
        call("create_directory", json!({"path": at("public/new")})),
    ]);
    let r = &py2_through(&gw, &steps);
    assert_eq!(r[0]["is_error"], false, "{}\n{}", r[0], gw.log());
    assert!(r[0].to_string().contains("public note"), "{}", r[0]);
    for escape in [&r[1], &r[2]] {
        assert_refused(escape, "/path", "pattern");
        assert!(!escape.to_string().contains("PRIVATE-SECRET"), "{escape}");
    }
    for (i, name) in [
        (3, "write_file"),
        (4, "edit_file"),
        (5, "move_file"),
        (6, "create_directory"),
    ] {
        assert_unknown_tool(&r[i], name);
    }
    assert_eq!(snapshot(&root), before, "files changed");
    assert!(!root.join("public/new").exists(), "a folder was created");
    differences.assert_none();
}

/// Proves: `server-memory`'s init draft passes `check` and serves unchanged; its read tools
/// (the whole graph, a search, named nodes) and its `memory://knowledge-graph` resource (listed
/// and read) answer every official client as the server does directly.
#[test]
fn server_memory_serves_as_directly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memory.jsonl");
    let graph = [
        json!({"type": "entity", "name": "Ada", "entityType": "person", "observations": ["writes programs", "likes tea"]}),
        json!({"type": "entity", "name": "Engine", "entityType": "machine", "observations": ["analytical"]}),
        json!({"type": "relation", "from": "Ada", "to": "Engine", "relationType": "programs"}),
    ];
    let lines: Vec<String> = graph.iter().map(Value::to_string).collect();
    std::fs::write(&file, lines.join("\n") + "\n").expect("write");
    let mut server = Stdio::new("memory", node_bin("mcp-server-memory"), &[]);
    server.env = vec![("MEMORY_FILE_PATH".into(), file.display().to_string())];

    let (gw, _draft) = init_check_serve(&server);
    let steps = [
        json!({"op": "list"}),
        call("read_graph", json!({})),
        call("search_nodes", json!({"query": "tea"})),
        call("open_nodes", json!({"names": ["Engine"]})),
        json!({"op": "resources"}),
        json!({"op": "read", "uri": "memory://knowledge-graph"}),
    ];
    let before = std::fs::read(&file).expect("read");
    let differences = compare_through_gateway(&server, &gw, &steps);
    assert_eq!(
        std::fs::read(&file).expect("read"),
        before,
        "the graph changed"
    );
    differences.assert_none();
}

/// Proves: `server-postgres` on a private PostgreSQL has an init draft that passes `check` and
/// serves unchanged; a query and the table-schema resources (listed and read) answer every
/// official client as the server does directly; a contract narrowing `sql` to one `SELECT`
/// refuses the server's known read-only escape (`COMMIT; INSERT …`) and the table keeps its rows,
/// while the same escape sent to the server directly does insert (so the refusal is the gateway's).
#[test]
fn server_postgres_serves_as_directly_and_narrowed_refuses_the_read_only_escape() {
    let pg = Postgres::start();
    pg.batch(
        "CREATE TABLE notes (id integer PRIMARY KEY, body text NOT NULL);
         INSERT INTO notes VALUES (1, 'first'), (2, 'second');",
    );
    let server = Stdio::new("pg", node_bin("mcp-server-postgres"), &[&pg.url()]);
    let (gw, _draft) = init_check_serve(&server);
    let schema = format!("postgres://{PG_USER}@127.0.0.1:{}/notes/schema", pg.port);
    let steps = [
        json!({"op": "list"}),
        call(
            "query",
            json!({"sql": "SELECT id, body FROM notes ORDER BY id"}),
        ),
        call(
            "query",
            json!({"sql": "SELECT count(*)::int AS n FROM notes"}),
        ),
        json!({"op": "resources"}),
        json!({"op": "read", "uri": schema}),
    ];
    let differences = compare_through_gateway(&server, &gw, &steps);
    drop(gw);

    let count = || pg.value_in("postgres", "SELECT count(*)::text FROM notes");
    let input = json!({"type": "object", "properties": {
            "sql": {"type": "string", "pattern": "^SELECT [^;]{1,500}$"}},
        "required": ["sql"], "additionalProperties": false});
    let contract = format!(
        "upstream: pg\ntools:\n  query:\n    description: One read-only SELECT.\n    \
         privilege: read\n    input: {input}\n"
    );
    let gw = serve_narrowed(&server, &contract);
    let escape = "COMMIT; INSERT INTO notes VALUES (3, 'written by the model')";
    let steps = json!([
        call(
            "query",
            json!({"sql": "SELECT body FROM notes WHERE id = 2"})
        ),
        call("query", json!({"sql": escape})),
        call("query", json!({"sql": format!("SELECT 1; {escape}")})),
    ]);
    let r = &py2_through(&gw, &steps);
    assert_eq!(r[0]["is_error"], false, "{}\n{}", r[0], gw.log());
    assert!(r[0].to_string().contains("second"), "{}", r[0]);
    assert_refused(&r[1], "/sql", "pattern");
    assert_refused(&r[2], "/sql", "pattern");
    assert_eq!(count().as_deref(), Some("2"), "the table changed");

    // Control: directly, the server runs the escape.
    let direct = super::Client::Python2.run(
        super::Target::Direct(&server),
        &[call("query", json!({"sql": escape}))],
    );
    assert_eq!(
        count().as_deref(),
        Some("3"),
        "the escape did not land directly: {direct:?}"
    );
    differences.assert_none();
}

/// Proves: the MCP Apps example `server-basic-vanillajs` has an init draft that passes `check`
/// and serves unchanged; its tool keeps its UI link (`_meta.ui.resourceUri`), its `ui://` app
/// resource is listed and read as the server serves it, and its tool answers in the same shape,
/// for every official client, directly and through the gateway.
#[test]
fn mcp_apps_example_serves_its_ui_as_directly() {
    let server = Stdio::new("apps", node_bin("mcp-server-basic-vanillajs"), &["--stdio"]);
    let (gw, _draft) = init_check_serve(&server);
    let mut now = call("get-time", json!({}));
    now["volatile"] = json!(true);
    let steps = [
        json!({"op": "list"}),
        now,
        json!({"op": "resources"}),
        json!({"op": "read", "uri": "ui://get-time/mcp-app.html"}),
    ];
    let differences = compare_through_gateway(&server, &gw, &steps);
    differences.assert_none();
}
