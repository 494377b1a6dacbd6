//! `StreamService/Read` answers on the wire without copying their bytes.
//!
//! A read's answer carries up to 8 MiB of stream bytes. tonic copies a
//! message into its encode buffer before it sends a byte, and on the other
//! side into its decode buffer before it hands the message over: two
//! copies and two waits per read in a catch-up through a gateway. The node
//! instead sends a view's reply as the gRPC frame it would be, its chunks
//! as the buffers they are held in (`view_reply_frames`); the gateway reads
//! any `ReadReply` (either encoder's) with `ReadReplyParser`, which keeps
//! each chunk as the pieces it arrived in. The bytes on the wire are the
//! protobuf encoding of `ReadReply`, so a tonic client or server on the
//! other end reads and writes them as before.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::Message;

use crate::stream::v1 as pb;

/// The full method name, as a request's path.
pub const READ_PATH: &str = "/ursula.stream.v1.StreamService/Read";

const LEN: u8 = 2;
/// `ReadReply.view` and `ReadChunk.encoded_view`: field 1, length-delimited.
const FIELD_1: u8 = (1 << 3) | LEN;
/// `ReadChunk.chunks`: field 2, length-delimited.
const FIELD_2: u8 = (2 << 3) | LEN;
/// A gRPC message's prefix: not compressed, then its length (big-endian).
const PREFIX: usize = 5;

fn varint_len(v: u64) -> usize {
    prost::encoding::encoded_len_varint(v)
}

/// One length-delimited field's header.
fn field_len(payload: usize) -> usize {
    1 + varint_len(payload as u64) + payload
}

/// The gRPC frame of a `ReadReply` holding a view: small headers, and the
/// `chunks` themselves between them (none copied). Fails when the message
/// would exceed `max` bytes.
pub fn view_reply_frames(encoded_view: &[u8], chunks: Vec<Bytes>, max: usize) -> Result<Vec<Bytes>, usize> {
    let inner = field_len(encoded_view.len()) + chunks.iter().map(|c| field_len(c.len())).sum::<usize>();
    let message = field_len(inner);
    if message > max {
        return Err(message);
    }
    let len = u32::try_from(message).map_err(|_| message)?;
    let mut head = BytesMut::with_capacity(PREFIX + 2 * 10 + encoded_view.len() + 11);
    head.put_u8(0);
    head.put_u32(len);
    head.put_u8(FIELD_1);
    prost::encoding::encode_varint(inner as u64, &mut head);
    head.put_u8(FIELD_1);
    prost::encoding::encode_varint(encoded_view.len() as u64, &mut head);
    head.put_slice(encoded_view);
    let mut frames = Vec::with_capacity(2 * chunks.len() + 1);
    for chunk in chunks {
        head.put_u8(FIELD_2);
        prost::encoding::encode_varint(chunk.len() as u64, &mut head);
        frames.push(head.split().freeze());
        frames.push(chunk);
    }
    if !head.is_empty() {
        frames.push(head.freeze());
    }
    Ok(frames.into_iter().filter(|f| !f.is_empty()).collect())
}

/// `message` as a gRPC frame: a request, or an answer without chunks.
pub fn framed(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(PREFIX + message.len());
    out.put_u8(0);
    out.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    out.put_slice(message);
    out.freeze()
}

/// The one message of a unary request's body.
pub fn unframed(mut body: Bytes) -> Result<Bytes, WireError> {
    if body.len() < PREFIX {
        return Err(WireError::Truncated);
    }
    if body.get_u8() != 0 {
        return Err(WireError::Compressed);
    }
    let len = u64::from(body.get_u32());
    match len.cmp(&(body.len() as u64)) {
        std::cmp::Ordering::Equal => Ok(body),
        std::cmp::Ordering::Greater => Err(WireError::Truncated),
        std::cmp::Ordering::Less => Err(WireError::Trailing),
    }
}

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    Compressed,
    TooLarge(u64),
    /// Bytes after the one message of a unary answer.
    Trailing,
    /// The answer ended inside its message.
    Truncated,
    Malformed(&'static str),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Compressed => write!(f, "a compressed message (none was asked for)"),
            WireError::TooLarge(n) => write!(f, "a message of {n} bytes"),
            WireError::Trailing => write!(f, "bytes after the answer's message"),
            WireError::Truncated => write!(f, "the answer ended inside its message"),
            WireError::Malformed(what) => write!(f, "a malformed ReadReply: {what}"),
        }
    }
}

impl std::error::Error for WireError {}

/// A `ReadReply` as read: a view with its chunks as the pieces they
/// arrived in (one piece each when a chunk came in one frame), or any
/// other reply, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadAnswer {
    View { encoded_view: Bytes, chunks: Vec<Vec<Bytes>> },
    Reply(pb::ReadReply),
}

impl ReadAnswer {
    /// The reply as tonic would have decoded it: each chunk one buffer (a
    /// copy only of a chunk that came in several frames).
    pub fn into_reply(self) -> pb::ReadReply {
        let (encoded_view, chunks) = match self {
            ReadAnswer::View { encoded_view, chunks } => (encoded_view, chunks),
            ReadAnswer::Reply(reply) => return reply,
        };
        let join = |pieces: Vec<Bytes>| match <[Bytes; 1]>::try_from(pieces) {
            Ok([one]) => one,
            Err(many) => many.concat().into(),
        };
        let chunks = chunks.into_iter().map(join).collect();
        pb::ReadReply { result: Some(pb::read_reply::Result::View(pb::ReadChunk { encoded_view, chunks })) }
    }
}

/// Where the parser is in the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Prefix,
    /// The reply's first tag: a view is read piece by piece, anything
    /// else whole.
    FirstTag,
    ViewLen,
    /// A tag inside the view (or, once it is read, after it).
    Tag,
    Len(u64),
    /// Payload of a field: 1 the encoded view, 2 a chunk, else skipped.
    Payload {
        field: u64,
        left: u64,
    },
    /// A varint to skip.
    SkipVarint,
    Whole,
    Done,
}

/// Reads one `ReadReply` from the data frames of a unary answer, as they
/// come, without copying a chunk that arrived in one frame.
pub struct ReadReplyParser {
    at: At,
    max: u64,
    prefix: [u8; PREFIX],
    have: usize,
    /// The message's bytes not read yet.
    left: u64,
    /// A varint being read across frames.
    varint: (u64, u32),
    encoded_view: BytesMut,
    /// The view's encoded part is read (its field came and ended).
    view_read: bool,
    chunks: Vec<Vec<Bytes>>,
    /// Once streaming (`stream_from_here`), chunk pieces go here instead.
    streaming: Option<Vec<Bytes>>,
    /// A reply other than a view, gathered whole.
    whole: BytesMut,
}

impl ReadReplyParser {
    pub fn new(max: usize) -> Self {
        ReadReplyParser {
            at: At::Prefix,
            max: max as u64,
            prefix: [0; PREFIX],
            have: 0,
            left: 0,
            varint: (0, 0),
            encoded_view: BytesMut::new(),
            view_read: false,
            chunks: Vec::new(),
            streaming: None,
            whole: BytesMut::new(),
        }
    }

    /// Reads the next data frame.
    pub fn push(&mut self, mut data: Bytes) -> Result<(), WireError> {
        while !data.is_empty() {
            self.step(&mut data)?;
        }
        Ok(())
    }

    /// A varint from `data` (possibly begun in an earlier frame); `None`
    /// when `data` ended first.
    fn varint(&mut self, data: &mut Bytes) -> Result<Option<u64>, WireError> {
        while !data.is_empty() {
            let byte = data.get_u8();
            self.take(1)?;
            let (value, shift) = &mut self.varint;
            if *shift >= 64 {
                return Err(WireError::Malformed("a varint longer than ten bytes"));
            }
            *value |= u64::from(byte & 0x7f) << *shift;
            *shift += 7;
            if byte & 0x80 == 0 {
                let (value, _) = std::mem::take(&mut self.varint);
                return Ok(Some(value));
            }
        }
        Ok(None)
    }

    /// Counts `n` bytes of the message as read.
    fn take(&mut self, n: u64) -> Result<(), WireError> {
        self.left = self.left.checked_sub(n).ok_or(WireError::Malformed("a field past the message's end"))?;
        Ok(())
    }

    fn step(&mut self, data: &mut Bytes) -> Result<(), WireError> {
        match self.at {
            At::Prefix => {
                let n = (PREFIX - self.have).min(data.len());
                self.prefix[self.have..self.have + n].copy_from_slice(&data.split_to(n));
                self.have += n;
                if self.have == PREFIX {
                    if self.prefix[0] != 0 {
                        return Err(WireError::Compressed);
                    }
                    let len =
                        u64::from(u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]]));
                    if len > self.max {
                        return Err(WireError::TooLarge(len));
                    }
                    self.left = len;
                    self.at = if len == 0 { At::Whole } else { At::FirstTag };
                }
            }
            At::FirstTag => {
                if data[0] == FIELD_1 {
                    data.advance(1);
                    self.take(1)?;
                    self.at = At::ViewLen;
                } else {
                    self.at = At::Whole;
                }
            }
            At::ViewLen => {
                if let Some(len) = self.varint(data)? {
                    // Fields after the view (none are defined) are skipped.
                    if len > self.left {
                        return Err(WireError::Malformed("a view longer than its message"));
                    }
                    self.at = self.after_field();
                }
            }
            At::Tag => {
                if let Some(tag) = self.varint(data)? {
                    let field = tag >> 3;
                    self.at = match tag & 7 {
                        0 => At::SkipVarint,
                        1 => At::Payload { field: 0, left: 8 },
                        2 => At::Len(field),
                        5 => At::Payload { field: 0, left: 4 },
                        _ => return Err(WireError::Malformed("an unknown wire type")),
                    };
                }
            }
            At::SkipVarint => {
                if self.varint(data)?.is_some() {
                    self.at = self.after_field();
                }
            }
            At::Len(field) => {
                if let Some(len) = self.varint(data)? {
                    if len > self.left {
                        return Err(WireError::Malformed("a field longer than its message"));
                    }
                    if field == 2 && self.streaming.is_none() {
                        self.chunks.push(Vec::new());
                    }
                    self.view_read |= field == 1 && len == 0;
                    self.at = if len == 0 { self.after_field() } else { At::Payload { field, left: len } };
                }
            }
            At::Payload { field, left } => {
                let n = left.min(data.len() as u64);
                let piece = data.split_to(n as usize);
                self.take(n)?;
                match (field, &mut self.streaming) {
                    (1, _) => self.encoded_view.extend_from_slice(&piece),
                    (2, Some(out)) => out.push(piece),
                    (2, None) => {
                        if let Some(chunk) = self.chunks.last_mut() {
                            chunk.push(piece);
                        }
                    }
                    _ => {}
                }
                self.view_read |= field == 1 && n == left;
                self.at = if n == left { self.after_field() } else { At::Payload { field, left: left - n } };
            }
            At::Whole => {
                let n = self.left.min(data.len() as u64);
                self.whole.extend_from_slice(&data.split_to(n as usize));
                self.left -= n;
                if self.left == 0 {
                    self.at = At::Done;
                }
            }
            At::Done => return Err(WireError::Trailing),
        }
        Ok(())
    }

    /// The encoded view of a view reply, once it has been read (before any
    /// chunk, as both encoders send it).
    pub fn view(&self) -> Option<&[u8]> {
        self.view_read.then_some(&self.encoded_view[..])
    }

    /// From here on, hands out chunk bytes as they arrive (`take_bytes`)
    /// instead of keeping chunks whole; returns those already read.
    pub fn stream_from_here(&mut self) -> Vec<Bytes> {
        self.streaming = Some(Vec::new());
        std::mem::take(&mut self.chunks).into_iter().flatten().collect()
    }

    /// The chunk bytes read since the last call, once streaming.
    pub fn take_bytes(&mut self) -> Vec<Bytes> {
        self.streaming.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Whether the message ended where the answer did.
    pub fn complete(&self) -> Result<(), WireError> {
        match self.at {
            At::Done => Ok(()),
            At::Whole if self.left == 0 => Ok(()),
            _ => Err(WireError::Truncated),
        }
    }

    fn after_field(&self) -> At {
        if self.left == 0 { At::Done } else { At::Tag }
    }

    /// The reply, once the answer's data has ended.
    pub fn finish(self) -> Result<ReadAnswer, WireError> {
        match self.at {
            At::Done if self.whole.is_empty() => {
                Ok(ReadAnswer::View { encoded_view: self.encoded_view.freeze(), chunks: self.chunks })
            }
            At::Done | At::Whole if self.left == 0 => pb::ReadReply::decode(self.whole.freeze())
                .map(ReadAnswer::Reply)
                .map_err(|_| WireError::Malformed("an undecodable reply")),
            _ => Err(WireError::Truncated),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use prost::Message;

    use super::{ReadAnswer, ReadReplyParser, WireError, view_reply_frames};
    use crate::stream::v1 as pb;

    const MAX: usize = 1 << 20;

    fn framed(reply: &pb::ReadReply) -> Vec<u8> {
        super::framed(&reply.encode_to_vec()).to_vec()
    }

    fn view(encoded_view: &[u8], chunks: &[&[u8]]) -> pb::ReadReply {
        let chunk = pb::ReadChunk {
            encoded_view: Bytes::copy_from_slice(encoded_view),
            chunks: chunks.iter().map(|c| Bytes::copy_from_slice(c)).collect(),
        };
        pb::ReadReply { result: Some(pb::read_reply::Result::View(chunk)) }
    }

    /// `wire` read in frames cut at `cuts`.
    fn parse(wire: &[u8], cuts: &[usize]) -> Result<ReadAnswer, WireError> {
        let mut parser = ReadReplyParser::new(MAX);
        let mut from = 0;
        for &cut in cuts.iter().chain(std::iter::once(&wire.len())) {
            parser.push(Bytes::copy_from_slice(&wire[from..cut]))?;
            from = cut;
        }
        parser.finish()
    }

    #[test]
    fn every_reply_reads_back_whatever_frames_it_came_in() {
        let failure = pb::ReadReply {
            result: Some(pb::read_reply::Result::Failure(pb::Failure {
                kind: Some(pb::failure::Kind::Invalid(pb::Invalid { message: "no".into() })),
            })),
        };
        let big = vec![7u8; 300];
        let replies = [
            view(b"meta", &[b"abc", b"", &big, b"\n"]),
            view(b"", &[]),
            view(b"only the view", &[]),
            view(b"", &[b"x"]),
            failure,
            pb::ReadReply { result: None },
        ];
        for reply in &replies {
            let wire = framed(reply);
            assert_eq!(parse(&wire, &[]).expect("one frame").into_reply(), *reply);
            for cut in 0..=wire.len() {
                assert_eq!(parse(&wire, &[cut]).expect("two frames").into_reply(), *reply, "cut at {cut}");
            }
            let every_byte: Vec<usize> = (1..wire.len()).collect();
            assert_eq!(parse(&wire, &every_byte).expect("byte by byte").into_reply(), *reply);
        }
    }

    #[test]
    fn the_nodes_frames_are_the_protobuf_reply_with_its_chunks_unmoved() {
        let chunks = vec![Bytes::from_static(b"first\n"), Bytes::from(vec![9u8; 200]), Bytes::new()];
        let frames = view_reply_frames(b"meta", chunks.clone(), MAX).expect("fits");
        assert!(frames.iter().any(|f| f.as_ptr() == chunks[1].as_ptr()), "a chunk goes out as it is held");
        let wire: Vec<u8> = frames.iter().flat_map(|f| f.iter().copied()).collect();
        let chunk_refs: Vec<&[u8]> = chunks.iter().map(|c| c.as_ref()).collect();
        assert_eq!(wire, framed(&view(b"meta", &chunk_refs)), "what tonic would have sent");
        // Read back frame by frame, each chunk arrives as one piece.
        let mut parser = ReadReplyParser::new(MAX);
        for frame in frames {
            parser.push(frame).expect("a frame");
        }
        match parser.finish().expect("a view") {
            ReadAnswer::View { encoded_view, chunks: got } => {
                assert_eq!(encoded_view, Bytes::from_static(b"meta"));
                assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1, 0]);
                assert_eq!(got[1][0].as_ptr(), chunks[1].as_ptr(), "not copied on the way in either");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(view_reply_frames(b"meta", vec![Bytes::from(vec![0; 100])], 50), Err(110));
    }

    #[test]
    fn a_view_streams_its_chunk_bytes_once_its_encoded_part_is_read() {
        let reply = view(b"meta", &[b"abc", b"defgh"]);
        let wire = framed(&reply);
        for cut in 0..=wire.len() {
            let mut parser = ReadReplyParser::new(MAX);
            parser.push(Bytes::copy_from_slice(&wire[..cut])).expect("first part");
            let (mut got, rest) = match parser.view() {
                Some(view) => {
                    assert_eq!(view, b"meta");
                    (parser.stream_from_here(), true)
                }
                None => (Vec::new(), false),
            };
            parser.push(Bytes::copy_from_slice(&wire[cut..])).expect("the rest");
            if rest {
                got.extend(parser.take_bytes());
                assert_eq!(got.concat(), b"abcdefgh", "cut at {cut}");
            } else {
                assert!(parser.view().is_some(), "read by the end");
            }
            assert_eq!(parser.complete(), Ok(()));
        }
        let mut parser = ReadReplyParser::new(MAX);
        parser.push(Bytes::copy_from_slice(&wire[..wire.len() - 2])).expect("most");
        assert_eq!(parser.complete(), Err(WireError::Truncated));
    }

    #[test]
    fn bad_answers_are_refused() {
        let wire = framed(&view(b"meta", &[b"abc"]));
        assert_eq!(parse(&wire[..wire.len() - 1], &[]), Err(WireError::Truncated));
        assert_eq!(parse(&wire[..3], &[]), Err(WireError::Truncated));
        let mut trailing = wire.clone();
        trailing.push(0);
        assert_eq!(parse(&trailing, &[]), Err(WireError::Trailing));
        let mut compressed = wire.clone();
        compressed[0] = 1;
        assert_eq!(parse(&compressed, &[]), Err(WireError::Compressed));
        let huge = [0, 0x7f, 0xff, 0xff, 0xff];
        assert_eq!(parse(&huge, &[]), Err(WireError::TooLarge(0x7fff_ffff)));
        // A view whose length runs past the message.
        let lying = [0, 0, 0, 0, 3, 0x0a, 0x7f, 0x0a];
        assert!(matches!(parse(&lying, &[]), Err(WireError::Malformed(_))));
        // A field of an unknown wire type inside the view.
        let odd = [0, 0, 0, 0, 3, 0x0a, 0x01, 0x0b];
        assert!(matches!(parse(&odd, &[]), Err(WireError::Malformed(_))));
        assert_eq!(parse(&[], &[]), Err(WireError::Truncated));
        // A request's body: one message, nothing more or less.
        let request = super::framed(b"query");
        assert_eq!(super::unframed(request.clone()), Ok(Bytes::from_static(b"query")));
        assert_eq!(super::unframed(request.slice(..6)), Err(WireError::Truncated));
        assert_eq!(super::unframed([&request[..], b"x"].concat().into()), Err(WireError::Trailing));
    }
}
