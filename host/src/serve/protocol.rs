//! The wire format of `hookhost serve`: splitting a connection's bytes into request lines
//! (bounded, a long line skipped to its end) and parsing one line into a [`Request`], or
//! the error answer of a line that is not one.

use std::io;
use std::path::PathBuf;

use bytes::{Buf, BytesMut};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::codec::Decoder;

/// One request line, parsed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The client's id, echoed in the answer.
    #[serde(default)]
    pub id: Value,
    /// The event to dispatch.
    #[serde(default)]
    pub event: Option<String>,
    /// The event's input JSON (default `{}`).
    #[serde(default)]
    pub input: Option<Value>,
    /// The project whose hooks run (default: the daemon's).
    #[serde(default)]
    pub project: Option<PathBuf>,
    /// A session to subscribe to instead of dispatching.
    #[serde(default)]
    pub subscribe: Option<String>,
    /// A hook to register instead of dispatching ([`crate::Registration`]: `event`,
    /// `matcher`, `hook`), for `session` or every session.
    #[serde(default)]
    pub register: Option<Value>,
    /// The id of a registered hook to unregister instead of dispatching.
    #[serde(default)]
    pub unregister: Option<u64>,
    /// The session a `register` is for (absent: every session).
    #[serde(default)]
    pub session: Option<String>,
    /// The client's answer to a `model` request of the daemon (`id` is that request's).
    #[serde(default, rename = "modelResult")]
    pub model_result: Option<Value>,
    /// The client's answer to an `mcpCall` request of the daemon (`id` is that request's).
    #[serde(default, rename = "mcpResult")]
    pub mcp_result: Option<Value>,
    /// The MCP servers the client serves for this event's `mcp_tool` hooks (those the
    /// settings' `mcpServers` do not define), called with `mcpCall` requests.
    #[serde(default, rename = "mcpServers")]
    pub mcp_servers: Option<Vec<String>>,
}

/// A line that is not a valid request: the answer says why, with the request's id when
/// the line was JSON with one.
#[derive(Debug, Clone, PartialEq)]
pub struct BadRequest {
    /// The id of the request, `null` when none could be read.
    pub id: Value,
    /// Why the line is not a request (starts with `bad request: `).
    pub message: String,
}

impl BadRequest {
    /// The answer line.
    pub fn answer(&self) -> String {
        json!({"id": self.id, "error": self.message}).to_string()
    }
}

/// Parses one request line (without its newline). Any bytes are accepted: what is not a
/// request is a [`BadRequest`], never a panic.
///
/// # Errors
///
/// The line is not UTF-8 JSON, not an object of the request's fields, or a field has the
/// wrong type.
pub fn parse_request(line: &[u8]) -> Result<Request, BadRequest> {
    // serde would read an array as the fields in order (`[1, "Stop"]`): only an object
    // is a request.
    if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(BadRequest {
            id: Value::Null,
            message: "bad request: a request is a JSON object".into(),
        });
    }
    serde_json::from_slice::<Request>(line).map_err(|e| BadRequest {
        // Salvage the id of a request that is JSON but not a valid request.
        id: serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(Value::Null),
        message: format!("bad request: {e}"),
    })
}

/// One unit of a request stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A line, without its newline.
    Line(BytesMut),
    /// A line over the cap: reported once, as soon as it is known to be too long; its
    /// bytes are skipped up to the next newline.
    TooLong,
}

/// Splits a byte stream into request lines of at most `max` bytes. Unlike
/// `tokio_util`'s `LinesCodec` (whose `FramedRead` ends the stream after the first
/// error, taking the connection with it), nothing in the bytes is an error: a line that
/// is too long becomes [`Frame::TooLong`] and the next line is read as usual; bytes that
/// are not UTF-8 are the parser's to refuse.
#[derive(Debug)]
pub struct RequestLines {
    max: usize,
    /// How much of the buffer is known to hold no newline.
    scanned: usize,
    /// Inside a line over the cap, skipping to its end.
    discarding: bool,
}

/// The read buffer's usual size; a buffer grown past [`RequestLines::SHRINK_ABOVE`] by
/// a long line is given back once that line is out.
pub(super) const READ_BUFFER: usize = 8 << 10;

impl RequestLines {
    const SHRINK_ABOVE: usize = 1 << 20;

    /// Lines of at most `max` bytes.
    pub fn new(max: usize) -> RequestLines {
        RequestLines {
            max,
            scanned: 0,
            discarding: false,
        }
    }

    fn shrink(buf: &mut BytesMut) {
        if buf.is_empty() && buf.capacity() > Self::SHRINK_ABOVE {
            *buf = BytesMut::with_capacity(READ_BUFFER);
        }
    }
}

impl Decoder for RequestLines {
    type Item = Frame;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        loop {
            let newline = buf[self.scanned..].iter().position(|&b| b == b'\n');
            if self.discarding {
                match newline {
                    Some(at) => {
                        buf.advance(self.scanned + at + 1);
                        self.scanned = 0;
                        self.discarding = false;
                        Self::shrink(buf);
                        continue;
                    }
                    None => {
                        buf.clear();
                        self.scanned = 0;
                        Self::shrink(buf);
                        return Ok(None);
                    }
                }
            }
            return Ok(match newline {
                Some(at) => {
                    let end = self.scanned + at;
                    self.scanned = 0;
                    if end > self.max {
                        buf.advance(end + 1);
                        Self::shrink(buf);
                        Some(Frame::TooLong)
                    } else {
                        let mut line = buf.split_to(end + 1);
                        line.truncate(end);
                        Self::shrink(buf);
                        Some(Frame::Line(line))
                    }
                }
                None if buf.len() > self.max => {
                    buf.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    Self::shrink(buf);
                    Some(Frame::TooLong)
                }
                None => {
                    self.scanned = buf.len();
                    None
                }
            });
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        self.scanned = 0;
        if self.discarding || buf.is_empty() {
            buf.clear();
            return Ok(None);
        }
        // The last line, without a newline.
        Ok(Some(Frame::Line(buf.split())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]], max: usize) -> Vec<Frame> {
        let mut decoder = RequestLines::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                out.push(frame);
            }
        }
        while let Some(frame) = decoder.decode_eof(&mut buf).unwrap() {
            out.push(frame);
        }
        out
    }

    fn line(text: &[u8]) -> Frame {
        Frame::Line(BytesMut::from(text))
    }

    #[test]
    fn lines_are_split_and_a_long_one_is_skipped_to_its_end() {
        assert_eq!(
            frames(&[b"ab\ncd", b"e\n\xff\xfe\nlast"], 8),
            [line(b"ab"), line(b"cde"), line(b"\xff\xfe"), line(b"last")]
        );
        // Too long before its newline arrives: reported at once, once; the rest of it,
        // in later chunks, is skipped; the next line is read as usual.
        assert_eq!(
            frames(&[b"0123456789", b"abcdef", b"gh\nok\n"], 8),
            [Frame::TooLong, line(b"ok")]
        );
        // Too long with its newline in the same chunk; exactly the cap is accepted.
        assert_eq!(
            frames(&[b"012345678\n01234567\n"], 8),
            [Frame::TooLong, line(b"01234567")]
        );
        // A long line at the end of input is not a request.
        assert_eq!(
            frames(&[b"ok\n0123456789"], 8),
            [line(b"ok"), Frame::TooLong]
        );
    }

    #[test]
    fn a_long_line_gives_its_buffer_back() {
        let mut decoder = RequestLines::new(4 << 20);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&vec![b'x'; 3 << 20]);
        buf.extend_from_slice(b"\n");
        assert!(matches!(
            decoder.decode(&mut buf).unwrap(),
            Some(Frame::Line(_))
        ));
        assert!(buf.capacity() <= READ_BUFFER, "{}", buf.capacity());
    }

    #[test]
    fn bad_lines_keep_their_id_when_they_have_one() {
        let bad = parse_request(br#"{"id": 3, "evnt": "Stop"}"#).unwrap_err();
        assert_eq!(bad.id, json!(3));
        assert!(
            bad.message.contains("unknown field `evnt`"),
            "{}",
            bad.message
        );
        for line in [
            &b"\xff\xfe"[..],
            b"{\"id\": 1, \"ev",
            b"[]",
            b"[1, \"Stop\"]",
            b"{\"id\": \"\xff\"}",
        ] {
            let bad = parse_request(line).unwrap_err();
            assert_eq!(bad.id, Value::Null);
            assert!(bad.message.starts_with("bad request: "));
        }
    }
}
