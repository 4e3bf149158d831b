//! Names that come from outside the operator's files, made safe before they reach a log line, a
//! receipt row, a span attribute or an error text: the tool name a client asks for, and the
//! caller name a token's claim carries.
//!
//! Both are the sender's text. Unchecked, a newline in one forges a log line (or a row of
//! `narrowgate receipts` output) and a megabyte of it floods the log and the receipts database.
//! So a name is shown as it is only when it is plain (short, no control or line-breaking
//! characters); any other is escaped and cut short. Tool names have a fixed shape
//! (`^[A-Za-z0-9_-]{1,64}$`): a name outside it cannot exist and is only ever shown, never
//! looked up. Caller names identify callers (sessions, rate limits, dedupe records, receipts), so
//! a caller name that has to be shortened keeps a digest of the whole name: two different long
//! names stay two callers.

use std::borrow::Cow;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::contract::valid_tool_name;

/// How many characters of a malformed tool name are shown (the longest valid name).
const TOOL_SHOWN_CHARS: usize = 64;
/// A caller name longer than this (in bytes) is shortened.
pub const CALLER_MAX_BYTES: usize = 128;
/// How many characters of a shortened caller name are kept before its digest.
const CALLER_KEPT_CHARS: usize = 64;
/// Marks a shortened name; a plain caller name never contains it, so a shortened name can never
/// be taken for a plain one.
const CUT: char = '…';

/// The tool name `name` as logs, receipts and error texts show it: itself when it is a valid
/// exposed name, else escaped, cut to 64 characters and followed by its length
/// (`bad\nname…[1048576 bytes]`).
pub fn shown_tool(name: &str) -> Cow<'_, str> {
    if valid_tool_name(name) {
        return Cow::Borrowed(name);
    }
    let (mut shown, cut) = escaped_prefix(name, TOOL_SHOWN_CHARS);
    if cut {
        let _ = write!(shown, "{CUT}[{} bytes]", name.len());
    }
    Cow::Owned(shown)
}

/// The caller name for a token's `caller_claim` value `claim`: itself when it is plain (at most
/// [`CALLER_MAX_BYTES`], no control or line-breaking characters, no `…`), else its first 64
/// characters escaped, `…` and the first 16 hex digits of the SHA-256 of the whole claim.
pub fn caller_name(claim: &str) -> Cow<'_, str> {
    let plain =
        claim.len() <= CALLER_MAX_BYTES && !claim.chars().any(|c| breaks_lines(c) || c == CUT);
    if plain {
        return Cow::Borrowed(claim);
    }
    let (mut shown, _) = escaped_prefix(claim, CALLER_KEPT_CHARS);
    let digest = Sha256::digest(claim.as_bytes());
    let _ = write!(shown, "{CUT}{}", hex::encode(&digest[..8]));
    Cow::Owned(shown)
}

/// The first `max_chars` characters of `text` with every character that [`breaks_lines`]
/// escaped (`\n`, `\u{202e}`, …) and backslashes doubled; and whether `text` was longer.
fn escaped_prefix(text: &str, max_chars: usize) -> (String, bool) {
    let mut shown = String::with_capacity(text.len().min(max_chars * 2));
    let mut chars = text.chars();
    for c in chars.by_ref().take(max_chars) {
        if breaks_lines(c) || c == '\\' {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    (shown, chars.next().is_some())
}

/// Control characters, and the characters that end a line or reorder text in some viewer: line
/// and paragraph separators, bidirectional overrides and isolates, zero-width characters.
fn breaks_lines(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Proves: valid tool names are shown as they are; any other is escaped (no newline, no
    /// bidi override survives) and cut to 64 characters with its length.
    #[test]
    fn malformed_tool_names_are_escaped_and_cut() {
        assert_eq!(shown_tool("get_weather-2"), "get_weather-2");
        assert_eq!(shown_tool("a\nb"), "a\\nb");
        assert_eq!(shown_tool("x\u{202e}y\\"), "x\\u{202e}y\\\\");
        let huge = "n".repeat(1 << 20);
        let shown = shown_tool(&huge);
        assert_eq!(shown, format!("{}…[1048576 bytes]", "n".repeat(64)));
        let forged = format!("{}\nINFO tools/call caller=admin", "a".repeat(70));
        assert!(!shown_tool(&forged).contains('\n'));
        assert_eq!(shown_tool(""), "");
    }

    /// Proves: plain caller names are kept; one with a newline or over 128 bytes is escaped,
    /// bounded and keeps a digest of the whole name, so two long names that share their first
    /// 64 characters stay two different callers, and a shortened name is never a plain one.
    #[test]
    fn caller_names_are_bounded_and_stay_distinct() {
        assert_eq!(caller_name("user-42@example.com"), "user-42@example.com");
        assert_eq!(caller_name("DOMAIN\\user"), "DOMAIN\\user");
        let forged = caller_name("alice\nINFO forged line");
        assert!(!forged.contains('\n'), "{forged}");
        assert!(forged.starts_with("alice\\nINFO forged line…"), "{forged}");
        let a = format!("{}a", "x".repeat(200));
        let b = format!("{}b", "x".repeat(200));
        let (shown_a, shown_b) = (caller_name(&a), caller_name(&b));
        assert_ne!(shown_a, shown_b);
        assert!(shown_a.len() <= CALLER_MAX_BYTES, "{shown_a}");
        // A claim that looks like a shortened name is shortened itself.
        assert_ne!(caller_name(&shown_a), shown_a);
    }
}
