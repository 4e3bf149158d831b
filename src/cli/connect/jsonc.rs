//! Edits a JSON (or JSONC: comments and trailing commas) document in place: one member or array
//! item is replaced or inserted and every other byte of the file is kept, so the user's other
//! entries, comments, key order and layout survive. A full parse-and-reserialise would lose the
//! comments and reorder keys (serde_json's maps are sorted here).

use serde_json::Value;

/// Which syntax the client's reader accepts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dialect {
    /// Plain JSON (`JSON.parse`): no comments, no trailing commas.
    Json,
    /// JSON with `//` and `/* */` comments and trailing commas.
    Jsonc,
}

/// Why a document was refused; the file is then left as it was.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum JsonError {
    #[error("line {line}, column {column}: {what}")]
    Syntax {
        line: usize,
        column: usize,
        what: String,
    },
    #[error("`{0}` is not a JSON object, so the entry cannot be put in it")]
    NotObject(String),
    #[error("`{0}` is not a JSON array, so the entry cannot be put in it")]
    NotArray(String),
}

/// A parsed value with its byte span in the text.
#[derive(Debug)]
struct Node {
    start: usize,
    end: usize,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    String(String),
    Other,
}

#[derive(Debug)]
struct Member {
    key: String,
    key_start: usize,
    value: Node,
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    dialect: Dialect,
}

impl Parser<'_> {
    fn error(&self, at: usize, what: impl Into<String>) -> JsonError {
        let before = &self.text[..at.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        JsonError::Syntax {
            line,
            column,
            what: what.into(),
        }
    }

    /// Skips whitespace and, in JSONC, comments.
    fn skip(&mut self) -> Result<(), JsonError> {
        loop {
            match self.bytes.get(self.pos) {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'/') => {
                    self.comment_allowed()?;
                    while !matches!(self.bytes.get(self.pos), None | Some(b'\n')) {
                        self.pos += 1;
                    }
                }
                Some(b'/') if self.bytes.get(self.pos + 1) == Some(&b'*') => {
                    self.comment_allowed()?;
                    let body = self.pos + 2;
                    match self.text[body..].find("*/") {
                        Some(i) => self.pos = body + i + 2,
                        None => return Err(self.error(self.pos, "a /* comment is never closed")),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn comment_allowed(&self) -> Result<(), JsonError> {
        match self.dialect {
            Dialect::Jsonc => Ok(()),
            Dialect::Json => Err(self.error(
                self.pos,
                "a comment, which this client's JSON reader does not accept",
            )),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, JsonError> {
        if depth > 128 {
            return Err(self.error(self.pos, "nested more than 128 levels deep"));
        }
        self.skip()?;
        let start = self.pos;
        match self.bytes.get(self.pos) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let s = self.string()?;
                Ok(Node {
                    start,
                    end: self.pos,
                    kind: Kind::String(s),
                })
            }
            Some(_) => {
                while matches!(self.bytes.get(self.pos), Some(b) if b.is_ascii_alphanumeric() || b"+-.".contains(b))
                {
                    self.pos += 1;
                }
                let word = &self.text[start..self.pos];
                let number = word.starts_with(|c: char| c == '-' || c.is_ascii_digit())
                    && serde_json::from_str::<serde_json::Number>(word).is_ok();
                if number || matches!(word, "true" | "false" | "null") {
                    Ok(Node {
                        start,
                        end: self.pos,
                        kind: Kind::Other,
                    })
                } else {
                    Err(self.error(start, "expected a value"))
                }
            }
            None => Err(self.error(start, "the document ends where a value was expected")),
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.bytes.get(self.pos) {
                None | Some(b'\n') => return Err(self.error(start, "a string is never closed")),
                Some(b'\\') => self.pos += 2,
                Some(b'"') => {
                    self.pos += 1;
                    return serde_json::from_str(&self.text[start..self.pos])
                        .map_err(|e| self.error(start, format!("a string is not valid: {e}")));
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    /// After an item: a comma (then maybe the closing `close` in JSONC) or `close`. Returns true
    /// at the end of the container.
    fn after_item(&mut self, close: u8) -> Result<bool, JsonError> {
        self.skip()?;
        match self.bytes.get(self.pos) {
            Some(b',') => {
                self.pos += 1;
                self.skip()?;
                if self.bytes.get(self.pos) == Some(&close) {
                    if self.dialect == Dialect::Json {
                        return Err(self.error(self.pos, "a trailing comma"));
                    }
                    self.pos += 1;
                    return Ok(true);
                }
                Ok(false)
            }
            Some(b) if *b == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(self.error(self.pos, format!("expected `,` or `{}`", char::from(close)))),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Node, JsonError> {
        let start = self.pos;
        self.pos += 1;
        let mut members = Vec::new();
        self.skip()?;
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
        } else {
            loop {
                self.skip()?;
                if self.bytes.get(self.pos) != Some(&b'"') {
                    return Err(self.error(self.pos, "expected a member name in double quotes"));
                }
                let key_start = self.pos;
                let key = self.string()?;
                self.skip()?;
                if self.bytes.get(self.pos) != Some(&b':') {
                    return Err(self.error(self.pos, "expected `:` after a member name"));
                }
                self.pos += 1;
                let value = self.value(depth + 1)?;
                members.push(Member {
                    key,
                    key_start,
                    value,
                });
                if self.after_item(b'}')? {
                    break;
                }
            }
        }
        Ok(Node {
            start,
            end: self.pos,
            kind: Kind::Object(members),
        })
    }

    fn array(&mut self, depth: usize) -> Result<Node, JsonError> {
        let start = self.pos;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip()?;
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
        } else {
            loop {
                items.push(self.value(depth + 1)?);
                if self.after_item(b']')? {
                    break;
                }
            }
        }
        Ok(Node {
            start,
            end: self.pos,
            kind: Kind::Array(items),
        })
    }
}

/// Parses the whole document (an empty or blank one is `None`).
fn parse(text: &str, dialect: Dialect) -> Result<Option<Node>, JsonError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        dialect,
    };
    p.skip()?;
    if p.pos == text.len() {
        return Ok(None);
    }
    let root = p.value(0)?;
    p.skip()?;
    if p.pos != text.len() {
        return Err(p.error(p.pos, "text after the end of the document"));
    }
    Ok(Some(root))
}

/// Checks that `text` is a document of `dialect`.
pub fn validate(text: &str, dialect: Dialect) -> Result<(), JsonError> {
    parse(text, dialect).map(|_| ())
}

/// The leading whitespace of the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let rest = &text[line_start..];
    &rest[..rest.len() - rest.trim_start_matches([' ', '\t']).len()]
}

/// The file's indentation step: that of its first indented line, else two spaces.
fn indent_unit(text: &str) -> String {
    for line in text.lines() {
        let trimmed = line.trim_start_matches([' ', '\t']);
        if !trimmed.is_empty() && trimmed.len() < line.len() {
            let ws = &line[..line.len() - trimmed.len()];
            return if ws.starts_with('\t') {
                "\t".into()
            } else {
                ws.into()
            };
        }
    }
    "  ".into()
}

/// Keys written first, in this order, in the objects this module renders; the others follow sorted.
const KEY_ORDER: &[&str] = &[
    "type",
    "id",
    "command",
    "args",
    "env",
    "url",
    "serverUrl",
    "httpUrl",
    "headers",
];

/// Renders `value` as JSON whose nested lines start with `indent` + `unit` per level.
pub fn render(value: &Value, indent: &str, unit: &str) -> String {
    let mut out = String::new();
    write_value(&mut out, value, indent, unit);
    out
}

fn write_value(out: &mut String, value: &Value, indent: &str, unit: &str) {
    let inner = format!("{indent}{unit}");
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            // serde_json's maps here are sorted; the clients' documented order reads better.
            let mut members: Vec<_> = map.iter().collect();
            members
                .sort_by_key(|(k, _)| KEY_ORDER.iter().position(|o| o == k).unwrap_or(usize::MAX));
            for (i, (k, v)) in members.into_iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&inner);
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_value(out, v, &inner, unit);
            }
            out.push('\n');
            out.push_str(indent);
            out.push('}');
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                out.push_str(&inner);
                write_value(out, v, &inner, unit);
            }
            out.push('\n');
            out.push_str(indent);
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The indentation of a container's items: that of an item starting its own line, else the
/// container's line's plus one step.
fn item_indent(
    text: &str,
    container: &Node,
    first_item_start: Option<usize>,
    unit: &str,
) -> String {
    if let Some(at) = first_item_start {
        let ind = line_indent(text, at);
        if text[..at].ends_with(ind) && text[..at - ind.len()].ends_with('\n') {
            return ind.to_string();
        }
    }
    format!("{}{unit}", line_indent(text, container.start))
}

/// Inserts `item` (already rendered, e.g. `"name": {...}`) as the last item of `container`.
fn insert_item(text: &str, container: &Node, item: &str, indent: &str) -> String {
    let close = container.end - 1;
    let items_empty = match &container.kind {
        Kind::Object(m) => m.is_empty(),
        Kind::Array(a) => a.is_empty(),
        _ => true,
    };
    let parent_indent = line_indent(text, container.start);
    if items_empty {
        let interior = &text[container.start + 1..close];
        if interior.trim().is_empty() {
            return format!(
                "{}\n{indent}{item}\n{parent_indent}{}",
                &text[..container.start + 1],
                &text[close..]
            );
        }
        // Only comments inside: the item goes first, the comments stay after it.
        return format!(
            "{}\n{indent}{item}{}",
            &text[..container.start + 1],
            &text[container.start + 1..]
        );
    }
    let last_end = match &container.kind {
        Kind::Object(m) => m.last().map_or(container.start + 1, |m| m.value.end),
        Kind::Array(a) => a.last().map_or(container.start + 1, |n| n.end),
        _ => container.start + 1,
    };
    // What follows the last item up to the closing bracket: maybe a trailing comma, comments.
    let tail = &text[last_end..close];
    let has_comma = tail.trim_start().starts_with(',');
    // The new item goes after the last non-blank text before the closing bracket, so that a
    // comment ending the last item's line stays on that line.
    let insert_at = last_end + tail.trim_end().len();
    let comma = if has_comma { "" } else { "," };
    format!(
        "{}{comma}{}\n{indent}{item}{}",
        &text[..last_end],
        &text[last_end..insert_at],
        &text[insert_at..]
    )
}

fn replace(text: &str, node: &Node, with: &str) -> String {
    format!("{}{with}{}", &text[..node.start], &text[node.end..])
}

/// Sets the member at `path` (object keys from the root) to `value`: replaces its value when it
/// exists, else inserts it (and the objects leading to it) after the last member of its parent.
pub fn set_member(
    text: &str,
    dialect: Dialect,
    path: &[&str],
    value: &Value,
) -> Result<String, JsonError> {
    let unit = indent_unit(text);
    let Some(root) = parse(text, dialect)? else {
        return Ok(format!("{}\n", render(&nest(path, value), "", &unit)));
    };
    let mut node = &root;
    for (i, key) in path.iter().enumerate() {
        let Kind::Object(members) = &node.kind else {
            return Err(JsonError::NotObject(path[..i].join(".")));
        };
        let indent = item_indent(text, node, members.first().map(|m| m.key_start), &unit);
        match members.iter().find(|m| m.key == *key) {
            Some(m) if i + 1 == path.len() => {
                let indent = line_indent(text, m.key_start);
                return Ok(replace(text, &m.value, &render(value, indent, &unit)));
            }
            Some(m) => node = &m.value,
            None => {
                let rest = nest(&path[i + 1..], value);
                let item = format!(
                    "{}: {}",
                    Value::String((*key).to_string()),
                    render(&rest, &indent, &unit)
                );
                return Ok(insert_item(text, node, &item, &indent));
            }
        }
    }
    // An empty path: the whole document is replaced.
    Ok(replace(text, node, &render(value, "", &unit)))
}

/// Puts `value` in the array at root member `array_key`: replaces the item whose `id_field` equals
/// that of `value`, else appends it (creating the array when missing).
pub fn upsert_array_item(
    text: &str,
    dialect: Dialect,
    array_key: &str,
    id_field: &str,
    value: &Value,
) -> Result<String, JsonError> {
    let unit = indent_unit(text);
    let wanted = value.get(id_field);
    let root = parse(text, dialect)?;
    let array = match root.as_ref().map(|r| &r.kind) {
        Some(Kind::Object(members)) => members.iter().find(|m| m.key == array_key),
        _ => None,
    };
    let Some(array) = array else {
        return set_member(
            text,
            dialect,
            &[array_key],
            &Value::Array(vec![value.clone()]),
        );
    };
    let Kind::Array(items) = &array.value.kind else {
        return Err(JsonError::NotArray(array_key.to_string()));
    };
    let indent = item_indent(text, &array.value, items.first().map(|n| n.start), &unit);
    for item in items {
        let Kind::Object(members) = &item.kind else {
            continue;
        };
        let id = members.iter().find(|m| m.key == id_field);
        let same = match (id.map(|m| &m.value.kind), wanted) {
            (Some(Kind::String(s)), Some(Value::String(w))) => s == w,
            _ => false,
        };
        if same {
            let indent = line_indent(text, item.start);
            return Ok(replace(text, item, &render(value, indent, &unit)));
        }
    }
    Ok(insert_item(
        text,
        &array.value,
        &render(value, &indent, &unit),
        &indent,
    ))
}

/// `{"a": {"b": value}}` for the path `[a, b]`.
fn nest(path: &[&str], value: &Value) -> Value {
    path.iter().rev().fold(value.clone(), |inner, key| {
        let mut map = serde_json::Map::new();
        map.insert((*key).to_string(), inner);
        Value::Object(map)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Proves: a new member goes after the last one, keeping a comment that ends that line, and
    /// a second identical edit changes nothing.
    #[test]
    fn insert_keeps_comments_and_is_idempotent() {
        let text =
            "{\n    // mine\n    \"servers\": {\n        \"a\": {\"x\": 1} // keep\n    }\n}\n";
        let once =
            set_member(text, Dialect::Jsonc, &["servers", "ng"], &json!({"y": [1]})).unwrap();
        assert_eq!(
            once,
            "{\n    // mine\n    \"servers\": {\n        \"a\": {\"x\": 1}, // keep\n        \"ng\": {\n            \"y\": [\n                1\n            ]\n        }\n    }\n}\n"
        );
        let twice = set_member(
            &once,
            Dialect::Jsonc,
            &["servers", "ng"],
            &json!({"y": [1]}),
        )
        .unwrap();
        assert_eq!(once, twice);
        validate(&twice, Dialect::Jsonc).unwrap();
    }

    /// Proves: missing parents are created, an empty document becomes one, strict JSON refuses
    /// comments and trailing commas, and an array item is replaced by its id.
    #[test]
    fn parents_strictness_and_array_items() {
        let made = set_member("", Dialect::Json, &["m", "n"], &json!({})).unwrap();
        assert_eq!(made, "{\n  \"m\": {\n    \"n\": {}\n  }\n}\n");
        let into = set_member("{\"a\": 1}", Dialect::Json, &["m", "n"], &json!(2)).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&into).unwrap(),
            json!({"a": 1, "m": {"n": 2}})
        );
        assert!(matches!(
            validate("{\"a\": 1,}", Dialect::Json),
            Err(JsonError::Syntax { .. })
        ));
        assert!(matches!(
            validate("{} // x", Dialect::Json),
            Err(JsonError::Syntax { .. })
        ));
        assert!(validate("{\"a\": [1,],} // x", Dialect::Jsonc).is_ok());
        assert!(validate("{\"a\": 1 \"b\": 2}", Dialect::Jsonc).is_err());
        let text = "{\"inputs\": [{\"id\": \"k\", \"v\": 1}, {\"id\": \"o\"}]}";
        let out = upsert_array_item(
            text,
            Dialect::Json,
            "inputs",
            "id",
            &json!({"id": "k", "v": 2}),
        )
        .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["inputs"], json!([{"id": "k", "v": 2}, {"id": "o"}]));
        let again = upsert_array_item(
            &out,
            Dialect::Json,
            "inputs",
            "id",
            &json!({"id": "k", "v": 2}),
        )
        .unwrap();
        assert_eq!(out, again);
    }
}
