//! The Raft record codec of `ursula-core` (`core/src/raft/codec.rs`):
//! a version byte, then postcard. The codec module is private to
//! `ursula-core`, so this target mirrors its small record types (same
//! field order, same version bytes) around the public `ursula-stream`
//! values that make up nearly all of every record: the forwarded
//! `Command`, a log entry's `Proposal`, and the snapshot's `StreamStore` in
//! all six snapshot formats.
//!
//! The input is one record as stored, version byte first, decoded as every
//! kind of record. Properties: decoding never panics; whatever decodes
//! re-encodes to bytes that decode to the same value (compared with `==`
//! where the type has it, else by the re-encoded bytes), and the snapshot
//! formats convert into a store that itself round-trips. A command that
//! decodes also applies to a store holding two streams without panicking,
//! and deterministically (two replicas get the same outcome and state).

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

use bytes::Bytes;
use ursula_stream::lifetime::Lifetime;
use ursula_stream::store::{
    LegacyStreamStore, StoreWithoutFences, StoreWithoutForks, StoreWithoutHistoryEvent, StoreWithoutRewrites,
};
use ursula_stream::{ApplyCtx, Body, Command, ContentType, CreateStream, StreamKey, StreamStore};

const VERSION: u8 = 1;
const SNAPSHOT_VERSION: u8 = 6;
const SNAPSHOT_VERSION_WITHOUT_HISTORY_EVENT: u8 = 5;
const SNAPSHOT_VERSION_WITHOUT_FORKS: u8 = 4;
const SNAPSHOT_VERSION_WITHOUT_REWRITES: u8 = 3;
const SNAPSHOT_VERSION_WITHOUT_FENCES: u8 = 2;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct LogIdRepr {
    term: u64,
    node: u64,
    index: u64,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct MembershipRepr {
    configs: Vec<Vec<u64>>,
    nodes: Vec<(u64, String)>,
}

/// `ursula_core::raft::types::Proposal`.
#[derive(Serialize, Deserialize, Debug, Clone)]
struct Proposal {
    now_ms: u64,
    command: Command,
}

/// Decoded once and dropped, as in the codec: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Serialize, Deserialize, Debug, Clone)]
enum Payload {
    Blank,
    Normal(Proposal),
    Membership(MembershipRepr),
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
struct SnapshotHead {
    last_log_id: Option<LogIdRepr>,
    membership_log_id: Option<LogIdRepr>,
    membership: MembershipRepr,
    snapshot_id: String,
}

fuzz_target!(|record: &[u8]| {
    let Some((&version, rest)) = record.split_first() else { return };
    if version == VERSION {
        // Forwarded commands (`encode_command`).
        if let Ok(command) = postcard::from_bytes::<Command>(rest) {
            stable(&command);
            applies_deterministically(command);
        }
        // Log entries (`encode_entry`).
        if let Ok(entry) = postcard::from_bytes::<(LogIdRepr, Payload)>(rest) {
            stable(&entry);
            let (id, _) = &entry;
            assert_eq!(&round_trip(id), id);
        }
        // Votes and log ids (`encode_vote`, `encode_log_id`).
        if let Ok(vote) = postcard::from_bytes::<(u64, u64, bool)>(rest) {
            assert_eq!(round_trip(&vote), vote);
        }
        if let Ok(id) = postcard::from_bytes::<LogIdRepr>(rest) {
            assert_eq!(round_trip(&id), id);
        }
        // A snapshot's meta alone (`encode_snapshot_meta`).
        if let Ok(head) = postcard::from_bytes::<SnapshotHead>(rest) {
            assert_eq!(round_trip(&head), head);
        }
    }
    // Snapshots (`decode_snapshot`): every format this build reads.
    let decoded: Option<(SnapshotHead, StreamStore)> = match version {
        SNAPSHOT_VERSION => postcard::from_bytes(rest).ok(),
        SNAPSHOT_VERSION_WITHOUT_HISTORY_EVENT => {
            postcard::from_bytes::<(SnapshotHead, StoreWithoutHistoryEvent)>(rest).ok().map(|(h, s)| (h, s.into()))
        }
        SNAPSHOT_VERSION_WITHOUT_FORKS => {
            postcard::from_bytes::<(SnapshotHead, StoreWithoutForks)>(rest).ok().map(|(h, s)| (h, s.into()))
        }
        SNAPSHOT_VERSION_WITHOUT_REWRITES => {
            postcard::from_bytes::<(SnapshotHead, StoreWithoutRewrites)>(rest).ok().map(|(h, s)| (h, s.into()))
        }
        SNAPSHOT_VERSION_WITHOUT_FENCES => {
            postcard::from_bytes::<(SnapshotHead, StoreWithoutFences)>(rest).ok().map(|(h, s)| (h, s.into()))
        }
        VERSION => postcard::from_bytes::<(SnapshotHead, LegacyStreamStore)>(rest).ok().map(|(h, s)| (h, s.into())),
        _ => None,
    };
    if let Some((head, store)) = decoded {
        // What `encode_snapshot` writes for it, decoded as the current format.
        let mut bytes = vec![SNAPSHOT_VERSION];
        bytes.extend(postcard::to_allocvec(&(&head, &store)).expect("encodes"));
        let (head2, store2): (SnapshotHead, StreamStore) = postcard::from_bytes(&bytes[1..]).expect("re-decodes");
        assert_eq!(head2, head);
        assert_eq!(store2, store, "a snapshot's store round-trips");
        let _ = store.write_unit_bytes();
    }
});

fn round_trip<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let bytes = postcard::to_allocvec(value).expect("a decoded value encodes");
    postcard::from_bytes(&bytes).expect("an encoded value decodes")
}

/// For types without `PartialEq`: encoding what decoding an encoding gave
/// yields the same bytes.
fn stable<T: Serialize + DeserializeOwned>(value: &T) {
    let first = postcard::to_allocvec(value).expect("a decoded value encodes");
    let back: T = postcard::from_bytes(&first).expect("an encoded value decodes");
    let second = postcard::to_allocvec(&back).expect("encodes again");
    assert_eq!(first, second, "decode(encode(x)) encodes as x did");
}

/// A replica's store before the fuzzed command: a JSON stream and a byte
/// stream with a sliding TTL.
static STORE: LazyLock<StreamStore> = LazyLock::new(|| {
    let mut store = StreamStore::new(7);
    let json = ContentType::parse("application/json").expect("a content type");
    let streams = [
        ("events", json.clone(), Lifetime::Forever, Body::prepare(Some(&json), Bytes::from_static(b"[1,2,3]"))),
        ("bytes", ContentType::octet_stream(), Lifetime::Ttl { secs: 5 }, Body::Bytes(Bytes::from_static(b"abcdef"))),
    ];
    for (i, (stream, content_type, lifetime, body)) in streams.into_iter().enumerate() {
        let key = StreamKey::parse("demo", stream).expect("a key");
        let create = CreateStream { key, content_type, lifetime, closed: false, stream_seq: None, body, expect: None };
        store.apply(Command::Create(create), ApplyCtx { now_ms: 1_000, log_index: i as u64 + 1 });
    }
    store
});

fn applies_deterministically(command: Command) {
    let ctx = ApplyCtx { now_ms: 2_000, log_index: 3 };
    let (mut a, mut b) = (STORE.clone(), STORE.clone());
    let first = a.apply(command.clone(), ctx);
    let second = b.apply(command, ctx);
    assert_eq!(first, second, "two replicas, two outcomes");
    assert_eq!(a, b, "two replicas, two states");
}
