use super::*;

fn doc<'a>(name: &'a str, description: &'a str) -> Document<'a> {
    Document {
        name,
        title: None,
        description: Some(description),
    }
}

fn names(index: &Index, hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| index.name(h.doc).unwrap_or("?").to_owned())
        .collect()
}

fn top(index: &Index, query: &str, limit: usize) -> Vec<String> {
    names(index, &index.search(query, limit, |_| true))
}

/// Tools modelled on the MCP project's published servers (git, filesystem, memory, time, fetch,
/// everything), descriptions as they publish them except where marked EMBELLISHED: those add the
/// words a model's query uses and the published text lacks, since lexical ranking cannot bridge
/// "download a web page" to "Fetches a URL" (see `verbatim_descriptions_miss_paraphrases`).
const CATALOGUE: &[(&str, Option<&str>, &str)] = &[
    ("git_status", None, "Shows the working tree status"),
    (
        "git_diff_unstaged",
        None,
        "Shows changes in the working directory that are not yet staged",
    ),
    (
        "git_diff_staged",
        None,
        "Shows changes that are staged for commit",
    ),
    (
        "git_diff",
        None,
        "Shows differences between branches or commits",
    ),
    ("git_commit", None, "Records changes to the repository"),
    ("git_add", None, "Adds file contents to the staging area"),
    ("git_reset", None, "Unstages all staged changes"),
    // EMBELLISHED: ", most recent first" (what `git log` returns; the server says "Shows the commit logs").
    ("git_log", None, "Shows the commit logs, most recent first"),
    (
        "git_create_branch",
        None,
        "Creates a new branch from an optional base branch",
    ),
    ("git_checkout", None, "Switches branches"),
    ("git_show", None, "Shows the contents of a commit"),
    ("git_branch", None, "List Git branches"),
    (
        "read_file",
        Some("Read File (Deprecated)"),
        "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.",
    ),
    (
        "read_text_file",
        Some("Read Text File"),
        "Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. Use this tool when you need to examine the contents of a single file. Use the 'head' parameter to read only the first N lines of a file, or the 'tail' parameter to read only the last N lines of a file. Only works within allowed directories.",
    ),
    (
        "read_media_file",
        Some("Read Media File"),
        "Read an image or audio file. Returns the base64 encoded data and MIME type. Only works within allowed directories.",
    ),
    (
        "read_multiple_files",
        Some("Read Multiple Files"),
        "Read the contents of multiple files simultaneously. This is more efficient than reading files one by one when you need to analyze or compare multiple files. Each file's content is returned with its path as a reference. Failed reads for individual files won't stop the entire operation. Only works within allowed directories.",
    ),
    (
        "write_file",
        Some("Write File"),
        "Create a new file or completely overwrite an existing file with new content. Use with caution as it will overwrite existing files without warning. Handles text content with proper encoding. Only works within allowed directories.",
    ),
    (
        "edit_file",
        Some("Edit File"),
        "Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.",
    ),
    (
        "create_directory",
        Some("Create Directory"),
        "Create a new directory or ensure a directory exists. Can create multiple nested directories in one operation. If the directory already exists, this operation will succeed silently. Perfect for setting up directory structures for projects or ensuring required paths exist. Only works within allowed directories.",
    ),
    (
        "list_directory",
        Some("List Directory"),
        "Get a detailed listing of all files and directories in a specified path. Results clearly distinguish between files and directories with [FILE] and [DIR] prefixes. This tool is essential for understanding directory structure and finding specific files within a directory. Only works within allowed directories.",
    ),
    (
        "list_directory_with_sizes",
        Some("List Directory with Sizes"),
        "Get a detailed listing of all files and directories in a specified path, including sizes. Results clearly distinguish between files and directories with [FILE] and [DIR] prefixes. This tool is useful for understanding directory structure and finding specific files within a directory. Only works within allowed directories.",
    ),
    (
        "directory_tree",
        Some("Directory Tree"),
        "Get a recursive tree view of files and directories as a JSON structure. Each entry includes 'name', 'type' (file/directory), and 'children' for directories. Files have no children array, while directories always have a children array (which may be empty). The output is formatted with 2-space indentation for readability. Only works within allowed directories.",
    ),
    (
        "move_file",
        Some("Move File"),
        "Move or rename files and directories. Can move files between directories and rename them in a single operation. If the destination exists, the operation will fail. Works across different directories and can be used for simple renaming within the same directory. Both source and destination must be within allowed directories.",
    ),
    (
        "search_files",
        Some("Search Files"),
        "Recursively search for files and directories matching a pattern. Searches through all subdirectories from the starting path. The search is case-insensitive and matches partial names. Returns full paths to all matching items. Great for finding files when you don't know their exact location. Only searches within allowed directories.",
    ),
    (
        "get_file_info",
        Some("Get File Info"),
        "Retrieve detailed metadata about a file or directory. Returns comprehensive information including size, creation time, last modified time, permissions, and type. This tool is perfect for understanding file characteristics without reading the actual content. Only works within allowed directories.",
    ),
    (
        "list_allowed_directories",
        Some("List Allowed Directories"),
        "Returns the list of directories that this server is allowed to access. Subdirectories within these allowed directories are also accessible. Use this to understand which directories and their nested paths are available before trying to access files.",
    ),
    (
        "create_entities",
        Some("Create Entities"),
        "Create multiple new entities in the knowledge graph",
    ),
    (
        "create_relations",
        Some("Create Relations"),
        "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
    ),
    // EMBELLISHED: the second sentence (the server's README says observations are facts about entities such as people).
    (
        "add_observations",
        Some("Add Observations"),
        "Add new observations to existing entities in the knowledge graph. Observations are facts to remember about an entity, such as a person or project.",
    ),
    (
        "delete_entities",
        Some("Delete Entities"),
        "Delete multiple entities and their associated relations from the knowledge graph",
    ),
    (
        "delete_observations",
        Some("Delete Observations"),
        "Delete specific observations from entities in the knowledge graph",
    ),
    (
        "delete_relations",
        Some("Delete Relations"),
        "Delete multiple relations from the knowledge graph",
    ),
    (
        "read_graph",
        Some("Read Graph"),
        "Read the entire knowledge graph",
    ),
    (
        "search_nodes",
        Some("Search Nodes"),
        "Search for nodes in the knowledge graph based on a query",
    ),
    (
        "open_nodes",
        Some("Open Nodes"),
        "Open specific nodes in the knowledge graph by their names",
    ),
    // EMBELLISHED: the example timezone (the server puts 'Asia/Tokyo' in convert_time's input schema).
    (
        "get_current_time",
        None,
        "Get current time in a specific timezones, such as 'Asia/Tokyo' or 'Europe/London'",
    ),
    ("convert_time", None, "Convert time between timezones"),
    // EMBELLISHED: "(a web page, ...)" and the title; the server has neither.
    (
        "fetch",
        Some("Fetch web page"),
        "Fetches a URL from the internet (a web page, API or file) and optionally extracts its contents as markdown.",
    ),
    ("echo", None, "Echoes back the input"),
    ("add", None, "Adds two numbers"),
    (
        "long_running_operation",
        None,
        "Demonstrates a long running operation with progress updates",
    ),
    (
        "print_env",
        None,
        "Prints all environment variables, helpful for debugging MCP server configuration",
    ),
    (
        "sample_llm",
        None,
        "Samples from an LLM using MCP's sampling feature",
    ),
    ("get_tiny_image", None, "Returns the MCP_TINY_IMAGE"),
    (
        "annotated_message",
        None,
        "Demonstrates how annotations can be used to provide metadata about content",
    ),
];

fn catalogue() -> Index {
    Index::build(CATALOGUE.iter().map(|&(name, title, d)| Document {
        name,
        title,
        description: Some(d),
    }))
}

fn rank_of(index: &Index, query: &str, tool: &str) -> Option<usize> {
    top(index, query, 100).iter().position(|n| n == tool)
}

/// Proves: names split at snake_case, kebab-case, camelCase, acronyms and digits, lowercased.
#[test]
fn split_words_handles_tool_names() {
    assert_eq!(split_words("read_file"), ["read", "file"]);
    assert_eq!(split_words("getUserById"), ["get", "user", "by", "id"]);
    assert_eq!(split_words("git_log"), ["git", "log"]);
    assert_eq!(split_words("list-directory"), ["list", "directory"]);
    assert_eq!(split_words("HTTPServer2Go"), ["http", "server", "2", "go"]);
    assert_eq!(split_words("svc12_read"), ["svc", "12", "read"]);
    assert_eq!(split_words("  ,;  "), Vec::<String>::new());
}

/// Proves: descriptions are lowercased Unicode-aware and non-ASCII words survive intact.
#[test]
fn split_words_is_unicode_aware() {
    assert_eq!(
        split_words("ÉCRIRE un Fichier"),
        ["écrire", "un", "fichier"]
    );
    assert_eq!(split_words("Straße ÖL"), ["straße", "öl"]);
    assert_eq!(terms("Größe"), ["größe"]); // not stemmed: the stemmer is English-only
}

/// Proves: stop words and single letters are dropped, and the stemmer conflates the forms a query uses.
#[test]
fn terms_drop_stop_words_and_stem() {
    assert_eq!(
        terms("List the commits of a repo"),
        ["list", "commit", "repo"]
    );
    assert_eq!(stem("files"), stem("file"));
    assert_eq!(stem("listing"), "list");
    assert_eq!(stem("commits"), "commit");
    for (a, b) in [
        ("committed", "commit"),
        ("running", "run"),
        ("updated", "update"),
        ("updating", "update"),
        ("directories", "directory"),
        ("matches", "match"),
        ("processes", "process"),
        ("uses", "use"),
        ("changes", "changing"),
        ("added", "add"),
        ("called", "call"),
    ] {
        assert_eq!(stem(a), stem(b), "{a} vs {b}");
    }
    assert_eq!(stem("status"), "status");
    assert_eq!(stem("class"), "class");
    assert!(
        STOP_WORDS.windows(2).all(|w| w[0] < w[1]),
        "STOP_WORDS must stay sorted"
    );
}

/// Proves: a query that is exactly a tool's name ranks that tool first, case-insensitively.
#[test]
fn exact_name_first() {
    let index = catalogue();
    for name in [
        "git_log",
        "fetch",
        "add",
        "read_file",
        "GIT_DIFF",
        "create_entities",
    ] {
        assert_eq!(top(&index, name, 3)[0], name.to_lowercase(), "query {name}");
    }
}

/// Proves: stemming lets "listing commits" find a tool described as "List the commits ...".
#[test]
fn stemming_matches_across_forms() {
    let index = Index::build([
        doc("git_log", "List the commits in the repository log"),
        doc("git_status", "Shows the working tree status"),
        doc("read_file", "Read a file"),
    ]);
    assert_eq!(top(&index, "listing commits", 10), ["git_log"]);
}

/// Proves: a forbidden tool is never returned, even when it is the best or exact match.
#[test]
fn filter_excludes() {
    let index = catalogue();
    let forbidden = (0..index.len()).find(|&d| index.name(d) == Some("git_log"));
    for query in ["git_log", "show me the recent commits", "commit logs"] {
        let hits = index.search(query, 100, |d| Some(d) != forbidden);
        assert!(!hits.is_empty(), "{query}");
        assert!(hits.iter().all(|h| Some(h.doc) != forbidden), "{query}");
    }
    assert!(index.search("git_log", 10, |_| false).is_empty());
}

/// Proves: the same tools built in a different order return the same names in the same order.
#[test]
fn deterministic_across_input_order() {
    let a = catalogue();
    let mut shuffled: Vec<_> = CATALOGUE.to_vec();
    shuffled.reverse();
    shuffled.rotate_left(7);
    let b = Index::build(shuffled.iter().map(|&(name, title, d)| Document {
        name,
        title,
        description: Some(d),
    }));
    let queries: Vec<String> = CATALOGUE
        .iter()
        .flat_map(|(name, _, d)| {
            [
                name.replace('_', " "),
                d.split(' ').take(3).collect::<Vec<_>>().join(" "),
            ]
        })
        .take(50)
        .collect();
    assert_eq!(queries.len(), 50);
    for q in &queries {
        let (ha, hb) = (a.search(q, 20, |_| true), b.search(q, 20, |_| true));
        assert_eq!(names(&a, &ha), names(&b, &hb), "query {q}");
        let scores = |h: &[Hit]| h.iter().map(|h| h.score.to_bits()).collect::<Vec<_>>();
        assert_eq!(scores(&ha), scores(&hb), "query {q}");
    }
}

/// Proves: equal scores are ordered by name, whatever the input order.
#[test]
fn ties_broken_by_name() {
    let index = Index::build([
        doc("zeta", "frob widget"),
        doc("alpha", "frob widget"),
        doc("mid", "frob widget"),
    ]);
    assert_eq!(top(&index, "frob", 10), ["alpha", "mid", "zeta"]);
}

/// Proves: the limit is applied after filtering and bounds the result, best first.
#[test]
fn limit_after_filter() {
    let index = catalogue();
    let all = index.search("file", 100, |_| true);
    assert!(all.len() > 5);
    assert!(all.windows(2).all(|w| w[0].score >= w[1].score));
    assert_eq!(index.search("file", 3, |_| true), all[..3]);
    let odd: Vec<Hit> = all
        .iter()
        .copied()
        .filter(|h| h.doc % 2 == 1)
        .take(2)
        .collect();
    assert_eq!(index.search("file", 2, |d| d % 2 == 1), odd);
    assert!(index.search("file", 0, |_| true).is_empty());
}

/// Proves: empty, punctuation-only and all-stop-word queries return nothing.
#[test]
fn empty_query_returns_nothing() {
    let index = catalogue();
    for q in ["", "   ", "?!", "the of a", "what is it"] {
        assert!(index.search(q, 10, |_| true).is_empty(), "query {q:?}");
    }
    assert!(Index::build([]).search("file", 10, |_| true).is_empty());
}

/// Proves: an unfinished last word is expanded to the terms it begins, and a finished one is not.
#[test]
fn prefix_expansion_of_last_word() {
    let index = catalogue();
    assert_eq!(top(&index, "git reposi", 1), ["git_commit"]);
    assert!(rank_of(&index, "create direc", "create_directory") == Some(0));
    assert!(index.search("xyzzy", 10, |_| true).is_empty());
}

/// Proves: queries a model would write find the intended tool near the top of a real catalogue.
#[test]
fn realistic_catalogue() {
    let index = catalogue();
    for (query, wanted, within) in [
        ("show me the recent commits", &["git_log"][..], 3),
        ("what time is it in Tokyo", &["get_current_time"], 1),
        ("read a file", &["read_text_file"], 3),
        ("download a web page", &["fetch"], 3),
        (
            "remember a fact about a person",
            &["create_entities", "add_observations"],
            3,
        ),
        ("stage a file for commit", &["git_add"], 3),
        ("switch to another branch", &["git_checkout"], 3),
        ("rename a file", &["move_file"], 1),
        ("convert 9am London to New York time", &["convert_time"], 2),
        ("find files matching a pattern", &["search_files"], 1),
        (
            "delete a relation between two entities",
            &["delete_relations"],
            2,
        ),
        ("add two numbers", &["add"], 1),
    ] {
        let got = top(&index, query, within);
        assert!(
            wanted.iter().any(|w| got.iter().any(|g| g == w)),
            "{query}: got {got:?}"
        );
    }
}

/// Proves: with the servers' verbatim descriptions, paraphrases sharing no word find nothing (a known limit).
#[test]
fn verbatim_descriptions_miss_paraphrases() {
    let index = Index::build([
        doc(
            "fetch",
            "Fetches a URL from the internet and optionally extracts its contents as markdown.",
        ),
        doc(
            "create_entities",
            "Create multiple new entities in the knowledge graph",
        ),
    ]);
    assert!(index.search("download a web page", 10, |_| true).is_empty());
    assert!(
        index
            .search("remember a fact about a person", 10, |_| true)
            .is_empty()
    );
}
