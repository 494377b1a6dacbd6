//! What catch-up, long-poll and SSE reads share: the query a read runs,
//! the clock of `Stream-Cursor`, and payload framing (plain bytes, JSON
//! arrays).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use ursula_stream::{Boundary, ReadFrom, ReadQuery};

use super::Shared;
use crate::options::JsonReads;

pub fn query<B>(shared: &Shared<B>, from: ReadFrom, max_bytes: u64) -> ReadQuery {
    ReadQuery {
        from,
        max_bytes,
        boundary: Boundary::Byte,
        whole_json_messages: shared.options.json_reads == JsonReads::Array,
    }
}

/// Wall-clock milliseconds, for `Stream-Cursor` (not protocol time).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

pub fn concat(chunks: &[Bytes]) -> Bytes {
    match chunks {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => {
            let mut out = BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
            for c in many {
                out.extend_from_slice(c);
            }
            out.freeze()
        }
    }
}

/// Stored messages (each followed by LF) as one JSON array.
pub fn json_array(chunks: &[Bytes]) -> Bytes {
    let total: usize = chunks.iter().map(Bytes::len).sum();
    let mut out = BytesMut::with_capacity(total + 2);
    out.extend_from_slice(b"[");
    let mut first = true;
    for chunk in chunks {
        for message in chunk.split(|&b| b == b'\n').filter(|m| !m.is_empty()) {
            if !first {
                out.extend_from_slice(b",");
            }
            first = false;
            out.extend_from_slice(message);
        }
    }
    out.extend_from_slice(b"]");
    out.freeze()
}
