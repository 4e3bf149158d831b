//! Codex's `config.toml`: the `[mcp_servers.NAME]` table, edited with toml_edit so that the
//! rest of the file (other tables, comments, layout) is kept as it was.

use toml_edit::{Array, DocumentMut, Item, Table, value};

use super::{Entry, KEY_VAR};

/// Why the file was refused; it is then left as it was.
#[derive(Debug, thiserror::Error)]
pub enum TomlError {
    #[error("{0}")]
    Parse(#[from] toml_edit::TomlError),
    #[error("`mcp_servers` is not a table, so the entry cannot be put in it")]
    NotTable,
}

/// `text` with `[mcp_servers.NAME]` set to `entry`.
pub fn set_entry(text: &str, name: &str, entry: &Entry) -> Result<String, TomlError> {
    let mut doc: DocumentMut = text.parse()?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut t = Table::new();
            // Written as `[mcp_servers.NAME]` headers alone, as codex itself writes them.
            t.set_implicit(true);
            Item::Table(t)
        })
        .as_table_mut()
        .ok_or(TomlError::NotTable)?;
    let mut table = Table::new();
    match entry {
        Entry::Stdio { command, args } => {
            table["command"] = value(command.as_str());
            table["args"] = value(args.iter().map(String::as_str).collect::<Array>());
            // Codex passes a stdio server only a short list of its own variables, plus these.
            table["env_vars"] = value(Array::from_iter([KEY_VAR]));
        }
        Entry::Url { url } => {
            table["url"] = value(url.as_str());
            // Codex sends `Authorization: Bearer <the variable's value>`.
            table["bearer_token_env_var"] = value(KEY_VAR);
        }
    }
    // The entry's own decoration (a comment above its header) is kept when it is replaced.
    if let Some(old) = servers.get(name).and_then(Item::as_table) {
        *table.decor_mut() = old.decor().clone();
        if let Some(pos) = old.position() {
            table.set_position(Some(pos));
        }
    }
    servers.insert(name, Item::Table(table));
    Ok(doc.to_string())
}
