//! The daemon's request reader: any bytes, arriving in any chunks, split into the same
//! lines as a plain split on `\n` (a line over the cap becomes exactly one `TooLong`),
//! and every line either parses as a request or gives a `bad request` answer that is
//! one line of JSON. Nothing panics.
#![no_main]

use bytes::BytesMut;
use hookhost::serve::{Frame, RequestLines, parse_request};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const MAX: usize = 64;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the chunk size the bytes arrive in.
    let Some((&chunk, bytes)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk % 32) + 1;
    let mut decoder = RequestLines::new(MAX);
    let mut buffer = BytesMut::new();
    let mut frames = Vec::new();
    for piece in bytes.chunks(chunk) {
        buffer.extend_from_slice(piece);
        while let Some(frame) = decoder.decode(&mut buffer).unwrap() {
            frames.push(frame);
        }
    }
    while let Some(frame) = decoder.decode_eof(&mut buffer).unwrap() {
        frames.push(frame);
    }
    // The model: split on newlines; the last piece counts when it is not empty.
    let mut pieces: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop();
    }
    let expected: Vec<Frame> = pieces
        .iter()
        .map(|piece| {
            if piece.len() > MAX {
                Frame::TooLong
            } else {
                Frame::Line(BytesMut::from(*piece))
            }
        })
        .collect();
    assert_eq!(frames, expected);
    for frame in &frames {
        if let Frame::Line(line) = frame {
            if let Err(bad) = parse_request(line) {
                let answer = bad.answer();
                assert!(!answer.contains('\n'));
                let json: serde_json::Value = serde_json::from_str(&answer).unwrap();
                assert!(json["error"].as_str().unwrap().starts_with("bad request: "));
            }
        }
    }
});
