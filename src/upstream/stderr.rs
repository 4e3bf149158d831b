//! A stdio upstream's stderr, into the gateway's log, at a bounded cost whatever the child writes.
//!
//! Read line by line with `lines()`, 400 MiB without a newline were 400 MiB of the gateway's
//! memory and then one 400 MB log line. Here stderr is read in pieces of [`READ_BYTES`]; a line
//! keeps its first [`MAX_LINE_BYTES`] (escaped text) and counts the rest ("… N bytes dropped");
//! control characters are escaped, so a child cannot forge log lines or drive a terminal; and at
//! most [`LINES_PER_SECOND`] lines a second are logged per upstream, the rest counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::Notify;

/// How much of stderr is read at a time.
const READ_BYTES: usize = 8 * 1024;
/// The most text logged of one line, once escaped.
pub const MAX_LINE_BYTES: usize = 4 * 1024;
/// Lines logged per upstream in one [`WINDOW`]; the rest are counted and reported.
const LINES_PER_SECOND: u32 = 100;
const WINDOW: Duration = Duration::from_secs(1);

/// Lines kept in a [`Tail`], and the most of each one kept there.
const TAIL_LINES: usize = 10;
const TAIL_LINE_BYTES: usize = 512;

/// The last lines a child wrote on stderr (whether logged or held back by the rate limit),
/// for the report of a start that failed: why a server did not start is nearly always there.
#[derive(Clone, Default)]
pub struct Tail(Arc<TailState>);

#[derive(Default)]
struct TailState {
    lines: Mutex<VecDeque<String>>,
    ended: AtomicBool,
    end: Notify,
}

impl Tail {
    fn push(&self, line: &Line) {
        let mut text = line.text.clone();
        if text.len() > TAIL_LINE_BYTES {
            let mut cut = TAIL_LINE_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push('…');
        }
        let mut lines = self.0.lines.lock().unwrap_or_else(|p| p.into_inner());
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(text);
    }

    fn finish(&self) {
        self.0.ended.store(true, Ordering::Release);
        self.0.end.notify_waiters();
    }

    /// The kept lines once stderr has ended (the child exited), or after `within` if it has
    /// not: a child that failed is usually still writing its last words as the handshake fails.
    pub async fn last_lines(&self, within: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let ended = self.0.end.notified();
            if self.0.ended.load(Ordering::Acquire)
                || tokio::time::timeout_at(deadline, ended).await.is_err()
            {
                break;
            }
        }
        let lines = self.0.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().cloned().collect()
    }
}

/// Logs `stderr` under the upstream's `name` until it ends, keeping its last lines in `tail`.
pub async fn log_stderr(name: String, stderr: impl AsyncRead + Unpin, tail: Tail) {
    log_lines(name, stderr, &tail).await;
    tail.finish();
}

async fn log_lines(name: String, mut stderr: impl AsyncRead + Unpin, tail: &Tail) {
    let mut buffer = vec![0u8; READ_BYTES];
    let mut lines = Lines::default();
    let mut limit = RateLimit::new(Instant::now());
    loop {
        // Lines held back are reported when their window ends, even if the child falls silent.
        let read = stderr.read(&mut buffer);
        let read = match limit.report_due() {
            Some(at) => match tokio::time::timeout_at(at.into(), read).await {
                Ok(read) => read,
                Err(_) => {
                    limit.report(&name);
                    continue;
                }
            },
            None => read.await,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        lines.feed(&buffer[..n], |line| {
            tail.push(&line);
            limit.log(&name, line, Instant::now());
        });
    }
    if let Some(line) = lines.finish() {
        tail.push(&line);
        limit.log(&name, line, Instant::now());
    }
    limit.report(&name);
}

/// A line as it is logged: its escaped text (at most [`MAX_LINE_BYTES`]) and how many of its
/// bytes did not fit.
#[derive(Debug, PartialEq, Eq)]
pub struct Line {
    pub text: String,
    pub dropped: u64,
}

/// Splits stderr into lines, keeping at most [`MAX_LINE_BYTES`] of each.
#[derive(Default)]
struct Lines {
    /// The kept start of the line being read (raw bytes).
    kept: Vec<u8>,
    /// Bytes of it beyond the kept start.
    dropped: u64,
}

impl Lines {
    /// Reads `chunk`, handing each line it ends to `on_line`.
    fn feed(&mut self, chunk: &[u8], mut on_line: impl FnMut(Line)) {
        let mut rest = chunk;
        loop {
            let end = rest.iter().position(|&b| b == b'\n');
            let piece = &rest[..end.unwrap_or(rest.len())];
            // Escaping at most quadruples a byte's length (`\x1b` for one byte), so this many
            // raw bytes always make enough text for the cap.
            let room = MAX_LINE_BYTES.saturating_sub(self.kept.len());
            let take = piece.len().min(room);
            self.kept.extend_from_slice(&piece[..take]);
            self.dropped += (piece.len() - take) as u64;
            match end {
                Some(end) => {
                    on_line(self.take());
                    rest = &rest[end + 1..];
                }
                None => return,
            }
        }
    }

    /// The unfinished last line, if any (the stream ended).
    fn finish(&mut self) -> Option<Line> {
        (!self.kept.is_empty() || self.dropped > 0).then(|| self.take())
    }

    fn take(&mut self) -> Line {
        let mut raw = &self.kept[..];
        // A CR LF line ending is one ending, not a control character in the line.
        if let Some(stripped) = raw.strip_suffix(b"\r") {
            raw = stripped;
        }
        let (text, used) = escape(raw, MAX_LINE_BYTES);
        let line = Line {
            text,
            dropped: self.dropped + (raw.len() - used) as u64,
        };
        self.kept.clear();
        self.dropped = 0;
        line
    }
}

/// `raw` as text (invalid UTF-8 replaced) with control characters escaped (`\x1b`, `\u{85}`),
/// cut to at most `cap` bytes; and how many bytes of `raw` that text holds.
fn escape(raw: &[u8], cap: usize) -> (String, usize) {
    let mut text = String::with_capacity(raw.len().min(cap));
    let mut used = 0;
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            let before = text.len();
            if c.is_control() {
                let code = u32::from(c);
                if code < 0x80 {
                    text.push_str(&format!("\\x{code:02x}"));
                } else {
                    text.push_str(&format!("\\u{{{code:x}}}"));
                }
            } else {
                text.push(c);
            }
            if text.len() > cap {
                text.truncate(before);
                return (text, used);
            }
            used += c.len_utf8();
        }
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            if text.len() + char::REPLACEMENT_CHARACTER.len_utf8() > cap {
                return (text, used);
            }
            text.push(char::REPLACEMENT_CHARACTER);
            used += invalid.len();
        }
    }
    (text, used)
}

/// At most [`LINES_PER_SECOND`] lines per [`WINDOW`]; what is held back is reported once the
/// window is over (at the next line, or at the end).
struct RateLimit {
    window_start: Instant,
    logged: u32,
    suppressed: u64,
}

impl RateLimit {
    fn new(now: Instant) -> RateLimit {
        RateLimit {
            window_start: now,
            logged: 0,
            suppressed: 0,
        }
    }

    /// Logs `line` unless this window's lines are used up. Returns whether it was logged.
    fn log(&mut self, upstream: &str, line: Line, now: Instant) -> bool {
        if now.duration_since(self.window_start) >= WINDOW {
            self.report(upstream);
            self.window_start = now;
            self.logged = 0;
        }
        if self.logged >= LINES_PER_SECOND {
            self.suppressed += 1;
            return false;
        }
        self.logged += 1;
        let Line { text, dropped } = line;
        if dropped > 0 {
            tracing::info!(%upstream, "stderr: {text}… {dropped} bytes dropped");
        } else {
            tracing::info!(%upstream, "stderr: {text}");
        }
        true
    }

    /// When the lines held back are to be reported (the end of their window), if there are any.
    fn report_due(&self) -> Option<Instant> {
        (self.suppressed > 0).then(|| self.window_start + WINDOW)
    }

    /// Logs how many lines were held back, if any.
    fn report(&mut self, upstream: &str) {
        if self.suppressed > 0 {
            tracing::warn!(%upstream, suppressed = self.suppressed, "stderr: lines not logged (more than {LINES_PER_SECOND} a second)");
            self.suppressed = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(chunks: &[&[u8]]) -> Vec<Line> {
        let mut lines = Lines::default();
        let mut out = Vec::new();
        for chunk in chunks {
            lines.feed(chunk, |line| out.push(line));
        }
        out.extend(lines.finish());
        out
    }

    fn line(text: &str, dropped: u64) -> Line {
        Line {
            text: text.to_string(),
            dropped,
        }
    }

    /// Proves: lines split across pieces come out whole, CR LF endings are dropped, a last line
    /// without a newline is still logged, and an empty stream logs nothing.
    #[test]
    fn lines_are_split_across_pieces() {
        assert_eq!(
            lines_of(&[b"one\r\ntw", b"o\n", b"\nthree"]),
            [
                line("one", 0),
                line("two", 0),
                line("", 0),
                line("three", 0)
            ]
        );
        assert!(lines_of(&[b""]).is_empty());
    }

    /// Proves: a line longer than the cap keeps its first [`MAX_LINE_BYTES`] and counts the
    /// rest, without holding more than the cap, and the next line is whole again.
    #[test]
    fn a_long_line_is_cut_and_counted() {
        let long = vec![b'a'; MAX_LINE_BYTES + 10];
        let mut lines = Lines::default();
        let mut out = Vec::new();
        for _ in 0..100 {
            lines.feed(&long, |l| out.push(l));
            assert!(lines.kept.len() <= MAX_LINE_BYTES);
        }
        lines.feed(b"\nnext\n", |l| out.push(l));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].text.len(), MAX_LINE_BYTES);
        assert_eq!(
            out[0].dropped,
            100 * (MAX_LINE_BYTES as u64 + 10) - MAX_LINE_BYTES as u64
        );
        assert_eq!(out[1], line("next", 0));
    }

    /// Proves: control characters (ESC, BEL, CR inside a line, C1 controls) are escaped, invalid
    /// UTF-8 is replaced, and the escaped text respects the cap, counting what it cut.
    #[test]
    fn control_characters_are_escaped_within_the_cap() {
        assert_eq!(
            escape(b"\x1b[31mred\x07 a\rb \xc2\x85 \xff", 100),
            ("\\x1b[31mred\\x07 a\\x0db \\u{85} \u{fffd}".to_string(), 18)
        );
        let (text, used) = escape(&[0x1b; 10], 9);
        assert_eq!((text.as_str(), used), ("\\x1b\\x1b", 2));
        let lines = lines_of(&[&[0x07; MAX_LINE_BYTES], b"\n"]);
        assert_eq!(lines[0].text.len(), MAX_LINE_BYTES);
        assert_eq!(
            lines[0].dropped,
            (MAX_LINE_BYTES - MAX_LINE_BYTES / 4) as u64
        );
    }

    /// Proves: the tail keeps the last [`TAIL_LINES`] lines of stderr, each cut to
    /// [`TAIL_LINE_BYTES`], including lines the rate limit did not log, and is read once the
    /// stream ends without waiting out the bound.
    #[tokio::test]
    async fn the_tail_keeps_the_last_lines() {
        let mut text = String::new();
        for i in 0..(LINES_PER_SECOND as usize + 20) {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str(&"x".repeat(TAIL_LINE_BYTES + 100));
        let tail = Tail::default();
        log_stderr("up".into(), text.as_bytes(), tail.clone()).await;
        let started = Instant::now();
        let lines = tail.last_lines(Duration::from_secs(30)).await;
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines[0], format!("line {}", LINES_PER_SECOND as usize + 11));
        assert_eq!(
            lines[TAIL_LINES - 1].len(),
            TAIL_LINE_BYTES + '…'.len_utf8()
        );
    }

    /// Proves: at most [`LINES_PER_SECOND`] lines are logged in a window; the rest are counted
    /// and the count starts over in the next window.
    #[test]
    fn lines_beyond_the_rate_are_counted() {
        let start = Instant::now();
        let mut limit = RateLimit::new(start);
        let logged = (0..LINES_PER_SECOND + 50)
            .filter(|_| limit.log("up", line("x", 0), start))
            .count();
        assert_eq!(logged, LINES_PER_SECOND as usize);
        assert_eq!(limit.suppressed, 50);
        assert!(limit.log("up", line("x", 0), start + WINDOW));
        assert_eq!(limit.suppressed, 0, "reported when the window ended");
    }
}
