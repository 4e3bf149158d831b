//! Splitting a `text/event-stream` body into the data of its events, as chunks arrive.
//!
//! Only what an MCP answer stream needs: `data:` lines joined by newlines, dispatched at a blank
//! line (an event with an empty `data:` line, like the priming event servers send first, is
//! handed on empty), and the last `id:` and `retry:`, for resuming a stream that closed early.
//! `event:` fields and comments are skipped.
//!
//! Why not the `sse-stream` crate, which the gateway uses where rmcp hands it a body: measured on
//! the same bytes (`bench/sse.rs`, BENCHMARKS.md "SSE splitting") it is no faster (a 300 kB answer
//! 264 µs against 256 µs, 1,000 progress events 162 µs against 161 µs, a 1 kB answer 0.69 µs
//! against 0.90 µs), and on an upstream's answer stream it would lose three things: a bound (it
//! held a 64 MiB line without complaint; this stops at 16 MiB), the SSE rule that a line without
//! a colon is a field name (it fails the whole stream with "invalid line"), and being fed the
//! chunks the forwarder's own HTTP/1.1 client reads in the calling task (it wants a `Body`).

/// The events of one stream, fed chunk by chunk.
pub struct EventSplitter {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The data of the event being read.
    data: Vec<u8>,
    has_data: bool,
    /// The last chunk ended with a CR: an LF starting the next one belongs to it.
    ended_with_cr: bool,
    /// The last event id the stream set (SSE's "last event ID buffer").
    last_id: Option<String>,
    /// The reconnection time the stream asked for, in milliseconds.
    retry_ms: Option<u64>,
    /// The most bytes one event (its unfinished line included) may hold.
    max_event_bytes: usize,
}

/// An event grew past the limit.
#[derive(Debug, PartialEq, Eq)]
pub struct EventTooLarge(pub usize);

impl EventSplitter {
    pub fn new(max_event_bytes: usize) -> EventSplitter {
        EventSplitter {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            ended_with_cr: false,
            last_id: None,
            retry_ms: None,
            max_event_bytes,
        }
    }

    /// A splitter for a resumed stream, whose last event id so far is `last_id`.
    pub fn resuming(max_event_bytes: usize, last_id: String) -> EventSplitter {
        let mut splitter = EventSplitter::new(max_event_bytes);
        splitter.last_id = Some(last_id);
        splitter
    }

    /// Reads `chunk`, handing the data of each event it completes to `on_event`, which says
    /// whether to go on (`true`) or stop reading (`false`, the rest of the chunk is dropped).
    pub fn feed(
        &mut self,
        chunk: &[u8],
        mut on_event: impl FnMut(&[u8]) -> bool,
    ) -> Result<bool, EventTooLarge> {
        let mut rest = chunk;
        // An empty chunk says nothing about the byte after the CR: the flag waits for the next.
        if !rest.is_empty()
            && std::mem::take(&mut self.ended_with_cr)
            && rest.first() == Some(&b'\n')
        {
            rest = &rest[1..];
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..end]);
            // A CR LF pair ends one line, not two.
            let skip = if rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            self.ended_with_cr = skip == 1 && rest[end] == b'\r' && end + 1 == rest.len();
            rest = &rest[end + skip..];
            if let Some(event) = self.end_line()?
                && !on_event(&event)
            {
                return Ok(false);
            }
        }
        self.line.extend_from_slice(rest);
        if self.line.len() + self.data.len() > self.max_event_bytes {
            return Err(EventTooLarge(self.max_event_bytes));
        }
        Ok(true)
    }

    /// The id of the last event that set one, to resume the stream after it.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// How long the stream asked a client to wait before reconnecting.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Ends the current line; returns the data of the event a blank line completes.
    fn end_line(&mut self) -> Result<Option<Vec<u8>>, EventTooLarge> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if !self.has_data {
                return Ok(None);
            }
            self.has_data = false;
            return Ok(Some(std::mem::take(&mut self.data)));
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        match field {
            // An id with a NUL is ignored, as the SSE specification says.
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry_ms = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            _ => {}
        }
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
            if self.data.len() > self.max_event_bytes {
                return Err(EventTooLarge(self.max_event_bytes));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` and collects every event's data as text.
    fn events(chunks: &[&[u8]]) -> Vec<String> {
        let mut splitter = EventSplitter::new(1024);
        let mut seen = Vec::new();
        for chunk in chunks {
            splitter
                .feed(chunk, |data| {
                    seen.push(String::from_utf8_lossy(data).into_owned());
                    true
                })
                .expect("within the limit");
        }
        seen
    }

    /// Proves: the shapes rmcp and the TypeScript SDK write (a priming event with an id, a
    /// retry and empty data, `event: message`, `id:` lines) come out as exactly their messages,
    /// and the last id and retry are kept for resuming.
    #[test]
    fn reads_the_data_of_each_event_and_skips_the_rest() {
        let stream =
            b"id: 0\nretry: 3000\ndata: \n\nevent: message\nid: 1\ndata: {\"a\":1}\n\n: comment\ndata:{\"b\":2}\n\n";
        assert_eq!(events(&[stream]), ["", "{\"a\":1}", "{\"b\":2}"]);
        let mut splitter = EventSplitter::new(1024);
        splitter.feed(stream, |_| true).expect("within the limit");
        assert_eq!(splitter.last_id(), Some("1"));
        assert_eq!(splitter.retry_ms(), Some(3000));
    }

    /// Proves: an event split anywhere across chunks (inside a field name, a value, a CR LF)
    /// reads the same as in one piece; CR, LF and CR LF all end lines.
    #[test]
    fn events_split_across_chunks_read_the_same() {
        let stream = b"event: message\r\ndata: {\"id\":\"x\",\r\ndata:  \"v\":1}\r\n\r\ndata: two\r\rdata: three\n\n";
        let whole = events(&[stream]);
        assert_eq!(whole, ["{\"id\":\"x\",\n \"v\":1}", "two", "three"]);
        for at in 0..stream.len() {
            let (a, b) = stream.split_at(at);
            assert_eq!(events(&[a, b]), whole, "split at {at}");
        }
    }

    /// Proves: an empty chunk between a CR and its LF does not split the CR LF into two line
    /// ends (which dispatched the event early, as two). Found by fuzz/ (`sse_events`).
    #[test]
    fn an_empty_chunk_between_cr_and_lf_changes_nothing() {
        let stream: &[u8] = b"data: a\r\ndata: b\r\n\r\n";
        let whole = events(&[stream]);
        assert_eq!(whole, ["a\nb"]);
        for at in 1..stream.len() {
            let (a, b) = stream.split_at(at);
            assert_eq!(events(&[a, b"", b]), whole, "an empty chunk at {at}");
        }
    }

    /// Proves: an event without an ending blank line is not handed out, and one larger than
    /// the limit is an error, not a growing buffer.
    #[test]
    fn unfinished_and_oversized_events() {
        assert!(events(&[b"data: {\"half\":"]).is_empty());
        let mut splitter = EventSplitter::new(8);
        assert_eq!(
            splitter.feed(b"data: 0123456789", |_| true),
            Err(EventTooLarge(8))
        );
        let mut splitter = EventSplitter::new(8);
        assert_eq!(
            splitter.feed(b"data: 01234\ndata: 56789\n", |_| true),
            Err(EventTooLarge(8))
        );
    }

    /// Proves: when the reader stops at an event, the events after it are not handed out.
    #[test]
    fn stops_when_told() {
        let mut splitter = EventSplitter::new(1024);
        let mut seen = 0;
        let went_on = splitter
            .feed(b"data: 1\n\ndata: 2\n\n", |_| {
                seen += 1;
                false
            })
            .expect("within the limit");
        assert!(!went_on);
        assert_eq!(seen, 1);
    }
}
