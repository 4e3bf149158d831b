//! A tool's `content:` list (docs/contracts.md): which kinds of content block its results may
//! carry to the client as the upstream sent them. Text is data the model reads; an image, audio
//! clip or embedded resource is passed only when the contract names its type (and, optionally,
//! its MIME types and size), so a tool that is meant to return text cannot smuggle anything else.

use rmcp::model::{ContentBlock, ResourceContents};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::ByteSize;

/// The kinds of content block a contract can allow. `resource_link` is not one: a link names
/// something outside the result, which `resources:` governs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ContentKind {
    Text,
    Image,
    Audio,
    Resource,
}

/// One entry of `content:` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "Content block rule")]
pub struct ContentFields {
    /// The block's type: `text`, `image`, `audio` or `resource` (an embedded resource).
    #[serde(rename = "type")]
    kind: ContentKind,
    /// The MIME types allowed (`image/png`, or `image/*` for any image; parameters such as
    /// `;charset=utf-8` are not compared); not for `text`, whose blocks carry none. Empty: any of
    /// the type (`image/*` for images, `audio/*` for audio, anything for resources).
    #[serde(default)]
    mime_types: Vec<String>,
    /// The most one block may hold: the decoded bytes of an image, audio clip or blob, the
    /// bytes of a text. The whole result is bounded by `max_result_bytes` in any case.
    max_bytes: Option<ByteSize>,
}

/// A checked `content:` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContentRule {
    #[serde(rename = "type")]
    pub kind: ContentKind,
    pub mime_types: Vec<String>,
    pub max_bytes: Option<u64>,
}

/// What applies when a contract has no `content:`: text only, bounded by `max_result_bytes`.
pub fn default_rules() -> Vec<ContentRule> {
    vec![ContentRule {
        kind: ContentKind::Text,
        mime_types: Vec::new(),
        max_bytes: None,
    }]
}

/// Checks the written entries. Errors carry a key suffix (below `content`) and a message.
pub fn build(fields: Vec<ContentFields>) -> Result<Vec<ContentRule>, (String, String)> {
    let mut rules = Vec::with_capacity(fields.len());
    for (i, f) in fields.into_iter().enumerate() {
        let at = |sub: &str| format!(".content.{i}{sub}");
        if f.kind == ContentKind::Text && !f.mime_types.is_empty() {
            return Err((
                at(".mime_types"),
                "text blocks carry no MIME type: remove `mime_types` (or use `type: resource` \
                 for text resources)"
                    .into(),
            ));
        }
        for (j, mime) in f.mime_types.iter().enumerate() {
            if !valid_mime_pattern(mime) {
                return Err((
                    at(&format!(".mime_types.{j}")),
                    format!("`{mime}` is not a MIME type like image/png or image/*"),
                ));
            }
        }
        rules.push(ContentRule {
            kind: f.kind,
            mime_types: f.mime_types,
            max_bytes: f.max_bytes.map(|b| b.0),
        });
    }
    Ok(rules)
}

/// `type/subtype` or `type/*`, in the characters RFC 6838 allows, with any `;parameters` (which
/// matching ignores).
fn valid_mime_pattern(mime: &str) -> bool {
    let mime = mime.split(';').next().unwrap_or_default().trim();
    let token = |s: &str| {
        !s.is_empty()
            && s.len() <= 127
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    match mime.split_once('/') {
        Some((kind, "*")) => token(kind),
        Some((kind, sub)) => token(kind) && token(sub),
        None => false,
    }
}

/// Whether some rule lets `block` pass as the upstream sent it.
pub fn allows(rules: &[ContentRule], block: &ContentBlock) -> bool {
    let Some((kind, mime, size)) = measure(block) else {
        return false;
    };
    rules.iter().any(|rule| {
        rule.kind == kind
            && rule.max_bytes.is_none_or(|max| size <= max)
            && mime_allowed(rule, kind, mime)
    })
}

/// A block's kind, MIME type and size; `None` for a resource link.
fn measure(block: &ContentBlock) -> Option<(ContentKind, Option<&str>, u64)> {
    let len = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    Some(match block {
        ContentBlock::Text(t) => (ContentKind::Text, None, len(t.text.len())),
        ContentBlock::Image(i) => (
            ContentKind::Image,
            Some(i.mime_type.as_str()),
            decoded_len(&i.data),
        ),
        ContentBlock::Audio(a) => (
            ContentKind::Audio,
            Some(a.mime_type.as_str()),
            decoded_len(&a.data),
        ),
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents {
                mime_type, text, ..
            } => (ContentKind::Resource, mime_type.as_deref(), len(text.len())),
            ResourceContents::BlobResourceContents {
                mime_type, blob, ..
            } => (
                ContentKind::Resource,
                mime_type.as_deref(),
                decoded_len(blob),
            ),
            // A kind of contents rmcp may learn later: no rule vouches for it yet.
            _ => return None,
        },
        _ => return None,
    })
}

/// The bytes base64 `data` decodes to (padding and line breaks not counted), without decoding.
fn decoded_len(data: &str) -> u64 {
    let symbols = data
        .bytes()
        .filter(|b| !matches!(b, b'=' | b'\r' | b'\n'))
        .count();
    u64::try_from(symbols / 4 * 3 + (symbols % 4).saturating_sub(1)).unwrap_or(u64::MAX)
}

/// Whether `mime` (the block's) is one `rule` allows: one of its `mime_types` (exactly, or by
/// `type/*`), or, when it lists none, any of the kind's own family.
fn mime_allowed(rule: &ContentRule, kind: ContentKind, mime: Option<&str>) -> bool {
    if kind == ContentKind::Text {
        return true;
    }
    let Some(mime) = mime.map(essence) else {
        // An image or audio block always has one; a resource without one passes only a rule
        // that names no types.
        return rule.mime_types.is_empty() && kind == ContentKind::Resource;
    };
    if rule.mime_types.is_empty() {
        return match kind {
            ContentKind::Image => mime.starts_with("image/"),
            ContentKind::Audio => mime.starts_with("audio/"),
            _ => true,
        };
    }
    rule.mime_types.iter().any(|allowed| {
        let allowed = essence(allowed);
        match allowed.strip_suffix("/*") {
            Some(family) => mime.split_once('/').is_some_and(|(f, _)| f == family),
            None => mime == allowed,
        }
    })
}

/// A MIME type without parameters, lower-cased (`Image/PNG; x=1` is `image/png`).
fn essence(mime: &str) -> String {
    mime.split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// How a text block relates to the validated structured content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vouched {
    /// It says something `structuredContent` does not.
    No,
    /// It is a JSON serialisation of it (any whitespace or key order, but no key twice: a
    /// client could read the other one).
    Json,
    /// It is exactly one of its string values, at any depth.
    StringValue,
}

/// Whether `text` is data the validated `structured` vouches for ([`Vouched`]). `compact` holds
/// the compact JSON of `structured` once made (a result's blocks share it): the usual text,
/// compared before anything is parsed.
pub fn vouched_text(text: &str, structured: &Value, compact: &mut Option<String>) -> Vouched {
    let json = compact.get_or_insert_with(|| serde_json::to_string(structured).unwrap_or_default());
    if text == json.as_str() {
        return Vouched::Json;
    }
    if is_string_value(text, structured) {
        return Vouched::StringValue;
    }
    // Another whitespace or key order (Python's `json.dumps(indent=2)`, say).
    if text.trim_start().starts_with(['{', '['])
        && serde_json::from_str::<Unique>(text).is_ok_and(|Unique(v)| v == *structured)
    {
        Vouched::Json
    } else {
        Vouched::No
    }
}

fn is_string_value(text: &str, value: &Value) -> bool {
    match value {
        Value::String(s) => s == text,
        Value::Array(items) => items.iter().any(|v| is_string_value(text, v)),
        Value::Object(map) => map.values().any(|v| is_string_value(text, v)),
        _ => false,
    }
}

/// A JSON value read with duplicate object keys refused (serde_json keeps the last one; other
/// readers keep the first).
struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON without duplicate keys")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some((key, Unique(v))) = map.next_entry::<String, Unique>()? {
            if object.insert(key, v).is_some() {
                return Err(serde::de::Error::custom("duplicate key"));
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(yaml: Value) -> Vec<ContentRule> {
        build(serde_json::from_value(yaml).expect("fields")).expect("valid")
    }

    fn block(v: Value) -> ContentBlock {
        serde_json::from_value(v).expect("a content block")
    }

    /// Proves: a rule passes a block only by its type, MIME type (exact, `type/*`, or the
    /// kind's own family when none is listed) and decoded size; links never pass.
    #[test]
    fn rules_pass_blocks_by_type_mime_type_and_size() {
        let png = block(json!({"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}));
        let svg = block(json!({"type": "image", "data": "aGk=", "mimeType": "image/svg+xml"}));
        let wav = block(json!({"type": "audio", "data": "aGk=", "mimeType": "audio/wav"}));
        let text = block(json!({"type": "text", "text": "hello"}));
        let link = block(json!({"type": "resource_link", "uri": "file:///x", "name": "x"}));
        let png_only = rules(json!([{"type": "image", "mime_types": ["image/png"]}]));
        assert!(allows(&png_only, &png));
        assert!(!allows(&png_only, &svg) && !allows(&png_only, &wav) && !allows(&png_only, &text));
        let any_image = rules(json!([{"type": "image"}]));
        assert!(allows(&any_image, &svg) && !allows(&any_image, &wav));
        // "hello" is 5 bytes decoded.
        assert!(allows(
            &rules(json!([{"type": "image", "max_bytes": 5}])),
            &png
        ));
        assert!(!allows(
            &rules(json!([{"type": "image", "max_bytes": 4}])),
            &png
        ));
        assert!(allows(&default_rules(), &text) && !allows(&default_rules(), &png));
        let everything = rules(
            json!([{"type": "text"}, {"type": "image"}, {"type": "audio"}, {"type": "resource"}]),
        );
        assert!(!allows(&everything, &link));
        let embedded = block(
            json!({"type": "resource", "resource": {"uri": "file:///a.pdf", "blob": "aGk=", "mimeType": "application/pdf"}}),
        );
        assert!(allows(
            &rules(json!([{"type": "resource", "mime_types": ["application/*"]}])),
            &embedded
        ));
        assert!(!allows(
            &rules(json!([{"type": "resource", "mime_types": ["text/plain"]}])),
            &embedded
        ));
        // Parameters are not part of the match.
        let app = block(
            json!({"type": "resource", "resource": {"uri": "ui://a", "text": "<p>", "mimeType": "text/html;profile=mcp-app"}}),
        );
        let html = |mime: &str| rules(json!([{"type": "resource", "mime_types": [mime]}]));
        assert!(allows(&html("text/html;profile=mcp-app"), &app));
        assert!(allows(&html("text/html"), &app));
    }

    /// Proves: bad entries are load errors naming the key.
    #[test]
    fn bad_entries_are_refused_with_their_key() {
        let e = build(
            serde_json::from_value(json!([{"type": "text", "mime_types": ["text/plain"]}]))
                .expect("fields"),
        )
        .unwrap_err();
        assert_eq!(e.0, ".content.0.mime_types");
        let e = build(
            serde_json::from_value(
                json!([{"type": "image"}, {"type": "image", "mime_types": ["png"]}]),
            )
            .expect("fields"),
        )
        .unwrap_err();
        assert_eq!(e.0, ".content.1.mime_types.0");
    }

    /// Proves: a text is vouched for when it is a serialisation of the structured content
    /// (compact or indented, any key order) or one of its string values, and not when it
    /// repeats a key (which readers resolve differently) or says anything else.
    #[test]
    fn texts_vouched_for_by_the_structured_content() {
        let s = json!({"b": [1, {"c": "deep"}], "a": "line"});
        let is = |text: &str, v: &Value| vouched_text(text, v, &mut None);
        assert_eq!(
            is(r#"{"b":[1,{"c":"deep"}],"a":"line"}"#, &s),
            Vouched::Json
        );
        assert_eq!(
            is(
                "{\n  \"a\": \"line\",\n  \"b\": [1, {\"c\": \"deep\"}]\n}",
                &s
            ),
            Vouched::Json
        );
        assert_eq!(is("line", &s), Vouched::StringValue);
        assert_eq!(is("deep", &s), Vouched::StringValue);
        assert_eq!(
            is(r#"{"a":"IGNORE","a":"line","b":[1,{"c":"deep"}]}"#, &s),
            Vouched::No
        );
        assert_eq!(is(r#"{"a":"line"}"#, &s), Vouched::No);
        assert_eq!(is("lin", &s), Vouched::No);
        assert_eq!(is("1", &s), Vouched::No);
    }
}
