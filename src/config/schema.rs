//! JSON Schemas of the configuration and contract files, derived from the types they are read into
//! (`narrowgate schema config|contract`, checked in under `schemas/`), so editors can validate and
//! complete the files and the schema cannot drift from what the loader accepts.
//!
//! The loader expands `${VAR}` in every string before it reads the typed values, so each of the small
//! string syntaxes below ([`ConfigDuration`], [`ByteSize`], [`Rate`]) also admits any string holding a
//! `${VAR}` reference: what it expands to is checked at load.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings, json_schema};
use serde_json::Value;

use super::{ByteSize, ConfigDuration, Rate};

/// A string holding a `${VAR}` reference, as an alternative inside an anchored pattern.
const ENV_REFERENCE: &str = r".*\$\{[A-Za-z0-9_]+\}.*";

/// An anchored pattern matching `syntax` or any string with a `${VAR}` reference in it.
pub(crate) fn or_env_reference(syntax: &str) -> String {
    format!("^(?:{syntax}|{ENV_REFERENCE})$")
}

/// The schema of `T` as a JSON Schema 2020-12 document titled `title`.
pub fn document<T: JsonSchema>(title: &str) -> Value {
    let mut schema = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>();
    schema.insert("title".into(), Value::String(title.into()));
    let mut value = schema.to_value();
    unwrap_descriptions(&mut value);
    value
}

/// Joins the lines of each description wrapped as a doc comment into one paragraph (a blank
/// line still separates paragraphs), so editors show flowing text.
fn unwrap_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                match item {
                    Value::String(text) if key == "description" => {
                        *text = text
                            .split("\n\n")
                            .map(|paragraph| paragraph.replace('\n', " "))
                            .collect::<Vec<_>>()
                            .join("\n\n");
                    }
                    _ => unwrap_descriptions(item),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

impl JsonSchema for ConfigDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": or_env_reference(r"\s*[0-9]+\s*(?:ms|s|m|h|d)\s*"),
            "description": "A duration: a whole number and a unit, `ms`, `s`, `m`, `h` or `d` \
                (`250ms`, `5s`, `2m`, `1h`, `30d`). A bare number is refused: its unit would be a guess.",
            "examples": ["5s", "250ms", "2m"],
        })
    }
}

impl JsonSchema for ByteSize {
    fn schema_name() -> Cow<'static, str> {
        "ByteSize".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["string", "integer"],
            "minimum": 0,
            "pattern": or_env_reference(r"\s*[0-9]+\s*(?:B|KB|kB|KiB|MB|MiB|GB|GiB)?\s*"),
            "description": "A size: a number of bytes, or a whole number and a unit, `B`, `KB`, \
                `KiB`, `MB`, `MiB`, `GB` or `GiB` (`512KiB`, `1MiB`, `1MB`). KB, MB and GB are powers \
                of 1000; KiB, MiB and GiB powers of 1024.",
            "examples": ["1MiB", "512KiB"],
        })
    }
}

/// Written back the way a person would write it (`1MiB`, else a number of bytes), which is what
/// the schema shows as the default of a size key.
impl serde::Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let bytes = self.0;
        let unit = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
            .into_iter()
            .find(|(size, _)| bytes >= *size && bytes.is_multiple_of(*size));
        match unit {
            Some((size, name)) => serializer.collect_str(&format_args!("{}{name}", bytes / size)),
            None => serializer.serialize_u64(bytes),
        }
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> Cow<'static, str> {
        "Rate".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": or_env_reference(r"\s*0*[1-9][0-9]*/[smh](?:\s+burst\s+0*[1-9][0-9]*)?\s*"),
            "description": "A rate limit: `N/s`, `N/m` or `N/h` (N calls per second, minute or hour), \
                optionally followed by `burst M`, the calls that may arrive at once (default N): \
                `20/s`, `100/m`, `5/m burst 10`.",
            "examples": ["20/s", "5/m burst 10"],
        })
    }
}
