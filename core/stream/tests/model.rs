//! Property test: random appends, producer retries and reads against a
//! trivial model (a `Vec<u8>` per stream). Checks byte-exactness, that
//! offsets only grow and are contiguous, and that producer retries never
//! write twice.

use std::collections::HashMap;

use bytes::Bytes;
use proptest::prelude::*;
use ursula_stream::{
    AppendStream, ApplyCtx, Body, Boundary, Command, ContentType, CreateStream, Lifetime, Offset, Outcome,
    ProducerHeaders, ReadFrom, ReadQuery, StreamKey, StreamStore,
};

#[derive(Debug, Clone)]
enum Op {
    Append {
        stream: u8,
        data: Vec<u8>,
    },
    /// A producer write: `retry` repeats the producer's last seq instead of
    /// sending the next one.
    Produce {
        stream: u8,
        data: Vec<u8>,
        retry: bool,
    },
    Read {
        stream: u8,
        from_fraction: u8,
        max: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..3, prop::collection::vec(any::<u8>(), 1..64)).prop_map(|(stream, data)| Op::Append { stream, data }),
        (0u8..3, prop::collection::vec(any::<u8>(), 1..64), any::<bool>())
            .prop_map(|(stream, data, retry)| Op::Produce { stream, data, retry }),
        (0u8..3, any::<u8>(), 1u16..200).prop_map(|(stream, from_fraction, max)| Op::Read {
            stream,
            from_fraction,
            max
        }),
    ]
}

fn key(i: u8) -> StreamKey {
    StreamKey::parse("model", &format!("s{i}")).expect("valid key")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn store_matches_a_byte_vector_model(ops in prop::collection::vec(op(), 1..80)) {
        let ct = ContentType::octet_stream();
        let mut store = StreamStore::new(1);
        let mut index = 0u64;
        let mut ctx = || { index += 1; ApplyCtx { now_ms: 1_000 + index, log_index: index } };
        let mut model: HashMap<u8, Vec<u8>> = HashMap::new();
        let mut next_seq: HashMap<u8, u64> = HashMap::new();
        let mut last_tail: HashMap<u8, u64> = HashMap::new();
        for s in 0..3u8 {
            let create = CreateStream { key: key(s), content_type: ct.clone(), lifetime: Lifetime::Forever, closed: false, stream_seq: None, body: Body::Empty, expect: None };
            prop_assert!(matches!(store.apply(Command::Create(create), ctx()), Outcome::Create(Ok(_))));
            model.insert(s, Vec::new());
        }
        for op in ops {
            match op {
                Op::Append { stream, data } => {
                    let cmd = AppendStream { key: key(stream), content_type: Some(ct.clone()), body: Body::Bytes(Bytes::from(data.clone())), close: false, stream_seq: None, producer: None, expect: None };
                    let Outcome::Append(Ok(ok)) = store.apply(Command::Append(cmd), ctx()) else { return Err(TestCaseError::fail("append refused")) };
                    let expected_start = model[&stream].len() as u64;
                    let receipt = ok.receipt.expect("a plain append has a receipt");
                    prop_assert_eq!(receipt.start, Offset(expected_start));
                    prop_assert_eq!(receipt.next, Offset(expected_start + data.len() as u64));
                    prop_assert!(receipt.next.bytes() > *last_tail.get(&stream).unwrap_or(&0) || expected_start == 0);
                    last_tail.insert(stream, receipt.next.bytes());
                    model.get_mut(&stream).expect("stream").extend_from_slice(&data);
                }
                Op::Produce { stream, data, retry } => {
                    let next = *next_seq.get(&stream).unwrap_or(&0);
                    let seq = if retry && next > 0 { next - 1 } else { next };
                    let cmd = AppendStream {
                        key: key(stream),
                        content_type: Some(ct.clone()),
                        body: Body::Bytes(Bytes::from(data.clone())),
                        close: false,
                        stream_seq: None,
                        producer: Some(ProducerHeaders { id: "p".into(), epoch: 0, seq, digest: None }),
                        expect: None,
                    };
                    let before = model[&stream].len();
                    let Outcome::Append(Ok(ok)) = store.apply(Command::Append(cmd), ctx()) else { return Err(TestCaseError::fail("producer write refused")) };
                    if seq < next {
                        // A retry: deduplicated, nothing written.
                        prop_assert_eq!(ok.kind, ursula_stream::AppendKind::Duplicate);
                        prop_assert_eq!(ok.info.tail, Offset(before as u64));
                    } else {
                        prop_assert_eq!(ok.kind, ursula_stream::AppendKind::Applied);
                        model.get_mut(&stream).expect("stream").extend_from_slice(&data);
                        next_seq.insert(stream, next + 1);
                    }
                }
                Op::Read { stream, from_fraction, max } => {
                    let bytes = &model[&stream];
                    let from = bytes.len() * usize::from(from_fraction) / 255;
                    let query = ReadQuery { from: ReadFrom::At(Offset(from as u64)), max_bytes: u64::from(max), boundary: Boundary::Byte, whole_json_messages: false };
                    let view = store.read(&key(stream), query, 0).expect("readable");
                    let got: Vec<u8> = view.chunks.iter().flat_map(|c| c.iter().copied()).collect();
                    let end = (from + usize::from(max)).min(bytes.len());
                    prop_assert_eq!(&got[..], &bytes[from..end]);
                    prop_assert_eq!(view.next, Offset(end as u64));
                    prop_assert_eq!(view.up_to_date, end == bytes.len());
                }
            }
        }
        for (stream, bytes) in &model {
            let query = ReadQuery { from: ReadFrom::Start, max_bytes: u64::MAX, boundary: Boundary::Byte, whole_json_messages: false };
            let view = store.read(&key(*stream), query, 0).expect("readable");
            let got: Vec<u8> = view.chunks.iter().flat_map(|c| c.iter().copied()).collect();
            prop_assert_eq!(&got, bytes);
        }
    }
}
