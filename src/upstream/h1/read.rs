//! Reading an answer: its head ([`take_head`]), the framing of its body ([`framing_of`]), and
//! where the buffered bytes say the body goes next ([`step`]).

use std::io;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use super::{Framing, MAX_HEAD_BYTES, MAX_HEADERS, MAX_LINE_BYTES, ReadBuffer, broken, invalid};

/// Takes the answer head at the start of `buffer`; `None` while it is not all there.
pub(super) fn take_head(buffer: &mut ReadBuffer) -> io::Result<Option<Head>> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut head = httparse::Response::new(&mut slots);
    match head.parse(buffer.unread()) {
        Ok(httparse::Status::Complete(length)) => {
            let parsed = Head::of(&head)?;
            buffer.consume(length);
            Ok(Some(parsed))
        }
        Ok(httparse::Status::Partial) if buffer.unread().len() > MAX_HEAD_BYTES => {
            Err(invalid("an answer head larger than 64 KiB"))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(invalid(format!("a malformed answer head: {e}"))),
    }
}

/// An answer head, owned.
pub(super) struct Head {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) keep_alive: bool,
}

impl Head {
    fn of(head: &httparse::Response<'_, '_>) -> io::Result<Head> {
        let status = head
            .code
            .and_then(|code| StatusCode::from_u16(code).ok())
            .ok_or_else(|| invalid("an answer without a valid status"))?;
        let mut headers = HeaderMap::with_capacity(head.headers.len());
        for header in head.headers.iter() {
            let name = HeaderName::from_bytes(header.name.as_bytes())
                .map_err(|_| invalid("an invalid header name"))?;
            let value = HeaderValue::from_bytes(header.value)
                .map_err(|_| invalid("an invalid header value"))?;
            headers.append(name, value);
        }
        let close = headers
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|token| token.trim().eq_ignore_ascii_case("close"));
        Ok(Head {
            status,
            keep_alive: head.version == Some(1) && !close,
            headers,
        })
    }
}

/// The body's framing, as RFC 9112 section 6.3 orders it for answers to a POST.
pub(super) fn framing_of(status: StatusCode, headers: &HeaderMap) -> io::Result<Framing> {
    if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Ok(Framing::Done);
    }
    // The codings are listed over every `Transfer-Encoding` line; chunked must be the last.
    if let Some(coding) = headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .next_back()
    {
        let chunked = coding
            .to_str()
            .ok()
            .and_then(|v| v.rsplit(',').next())
            .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        return Ok(if chunked {
            Framing::Chunked { in_chunk: None }
        } else {
            Framing::UntilClose
        });
    }
    let mut lengths = headers.get_all(http::header::CONTENT_LENGTH).iter();
    match (lengths.next(), lengths.next()) {
        (None, _) => Ok(Framing::UntilClose),
        (Some(length), None) => match length
            .to_str()
            .ok()
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<u64>().ok())
        {
            Some(0) => Ok(Framing::Done),
            Some(n) => Ok(Framing::Length(n)),
            None => Err(invalid("an invalid Content-Length")),
        },
        (Some(_), Some(_)) => Err(invalid("several Content-Length headers")),
    }
}

/// What the buffered bytes hold next under `framing` (which it advances past what it reports).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Skip `skip` bytes, then `len` bytes of body data.
    Data { skip: usize, len: usize },
    /// Framing bytes to skip (a chunk's CRLF, a chunk-size line).
    Skip(usize),
    /// The body ends after these framing bytes.
    End(usize),
    /// Nothing complete is buffered: read more.
    More,
}

pub(super) fn step(framing: &mut Framing, buffer: &ReadBuffer) -> io::Result<Step> {
    let unread = buffer.unread();
    match framing {
        Framing::Done => Ok(Step::End(0)),
        Framing::Broken => Err(broken()),
        Framing::UntilClose if unread.is_empty() => Ok(Step::More),
        Framing::UntilClose => Ok(Step::Data {
            skip: 0,
            len: unread.len(),
        }),
        Framing::Length(_) if unread.is_empty() => Ok(Step::More),
        Framing::Length(left) => {
            let len = unread
                .len()
                .min(usize::try_from(*left).unwrap_or(usize::MAX));
            *left -= len as u64;
            if *left == 0 {
                *framing = Framing::Done;
            }
            Ok(Step::Data { skip: 0, len })
        }
        Framing::Chunked { in_chunk: Some(0) } => match unread {
            [b'\r', b'\n', ..] => {
                *framing = Framing::Chunked { in_chunk: None };
                Ok(Step::Skip(2))
            }
            [] | [b'\r'] => Ok(Step::More),
            _ => Err(invalid("a chunk not followed by CRLF")),
        },
        Framing::Chunked {
            in_chunk: Some(left),
        } => {
            if unread.is_empty() {
                return Ok(Step::More);
            }
            let len = unread
                .len()
                .min(usize::try_from(*left).unwrap_or(usize::MAX));
            *left -= len as u64;
            Ok(Step::Data { skip: 0, len })
        }
        // httparse reads a line without digits as size 0: not a chunk-size line.
        Framing::Chunked { in_chunk: None }
            if unread.first().is_some_and(|b| !b.is_ascii_hexdigit()) =>
        {
            Err(invalid("a chunk-size line without a size"))
        }
        Framing::Chunked { in_chunk: None } => match httparse::parse_chunk_size(unread) {
            Ok(httparse::Status::Complete((line, 0))) => match trailers_end(&unread[line..])? {
                Some(trailers) => {
                    *framing = Framing::Done;
                    Ok(Step::End(line + trailers))
                }
                None => Ok(Step::More),
            },
            Ok(httparse::Status::Complete((line, size))) => {
                *framing = Framing::Chunked {
                    in_chunk: Some(size),
                };
                Ok(Step::Skip(line))
            }
            Ok(httparse::Status::Partial) if unread.len() > MAX_LINE_BYTES => {
                Err(invalid("a chunk-size line longer than 4 KiB"))
            }
            Ok(httparse::Status::Partial) => Ok(Step::More),
            Err(_) => Err(invalid("an invalid chunk size")),
        },
    }
}

/// The length of the trailer section after the last chunk (trailer lines, then an empty line),
/// if it is all buffered.
fn trailers_end(bytes: &[u8]) -> io::Result<Option<usize>> {
    let mut at = 0;
    loop {
        let Some(eol) = bytes[at..].windows(2).position(|w| w == b"\r\n") else {
            if bytes.len() > MAX_LINE_BYTES {
                return Err(invalid("a trailer section longer than 4 KiB"));
            }
            return Ok(None);
        };
        at += eol + 2;
        if eol == 0 {
            return Ok(Some(at));
        }
    }
}
