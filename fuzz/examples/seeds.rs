//! Writes the seed corpus of every fuzz target (`fuzz/corpus/<target>/`)
//! from real values: JSON bodies, offset tokens and headers, request
//! targets, WAL segments written by the WAL's own writer, Raft records and
//! wire messages encoded as the server encodes them. Run it again after a
//! format change:
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example seeds -- fuzz/corpus
//! ```

use std::path::{Path, PathBuf};
use std::sync::mpsc;

use bytes::Bytes;
use serde::Serialize;
use ursula_http::backend::{PartAdmission, PartStaged, PartsCommit, PartsDiscard, PartsRefusal, StagedPart};
use ursula_http::wire;
use ursula_stream::command::JsonBatch;
use ursula_stream::lifetime::Lifetime;
use ursula_stream::{
    AdvanceRetention, AppendStream, ApplyCtx, Body, Boundary, Command, ContentType, CreateStream, DeleteStream,
    Incarnation, Offset, Outcome, ProducerHeaders, PublishSnapshot, ReadFrom, ReadQuery, Rejection, RenewStream,
    SnapshotDigest, StreamKey, StreamSeq, StreamStore,
};
use ursula_wal::{Fsync, Wal, WalOptions};

fn main() {
    let root = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus".into()));
    json_text(&root.join("json_text"));
    offsets_headers(&root.join("offsets_headers"));
    router(&root.join("router"));
    wal_frame(&root.join("wal_frame"));
    let values = Values::new();
    raft_command(&root.join("raft_command"), &values);
    wire_types(&root.join("wire_types"), &values);
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("corpus dir");
    std::fs::write(dir.join(name), bytes).expect("seed");
}

fn json_text(dir: &Path) {
    let nested_ok = format!("{}{}", "[".repeat(127), "]".repeat(127));
    let too_deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
    let seeds: &[(&str, &[u8])] = &[
        ("object", br#"{"a": 1, "b": [true, false, null]}"#),
        ("array_of_messages", b"[1, \"two\", {\"three\": [3]}, -0.5e+10]"),
        ("empty_array", b"[ ]"),
        ("scalar", b"  \"text with \\\"escapes\\\" \\u00e9 \\ud800\"\n"),
        ("duplicates_and_numbers", br#"{"k":1,"k":2.50,"big":123456789012345678901234567890e-3}"#),
        ("utf8", "[\"h\u{e9}llo\", \"\u{1F600}\"]".as_bytes()),
        ("nested_127", nested_ok.as_bytes()),
        ("too_deep", too_deep.as_bytes()),
        ("syntax_error", b"[1, 2,]"),
        ("invalid_utf8", b"[\"\xff\"]"),
        ("control_char", b"\"a\x01b\""),
        ("leading_zero", b"01"),
    ];
    for (name, body) in seeds {
        write(dir, name, body);
    }
}

fn offsets_headers(dir: &Path) {
    let seeds: &[(&str, &str)] = &[
        ("offset_token", "00000000000000000042\nstream-ttl: 3600\ncontent-type: application/json; charset=UTF-8"),
        ("sentinels", "-1\nstream-closed: TRUE\naccept-encoding: gzip;q=0, br, *"),
        ("now", "now\nstream-expires-at: 2030-01-01T00:00:00.5+02:00\ncontent-length: 12"),
        (
            "producer",
            "18446744073709551615\nproducer-id: writer-1\nproducer-epoch: 0\nproducer-seq: 9007199254740991\n\
             producer-digest: af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
        ),
        (
            "conditional",
            "99999999999999999999\nstream-seq: 0001\nstream-incarnation: 4503599627370496\n\
             content-encoding: identity",
        ),
        ("refusals", "+0000000000000000042\nstream-ttl: 03600\nstream-ttl: 5\nproducer-id: p\nstream-record-match: x"),
        ("content_type", "text/plain;charset=utf-8;;format=flowed\ncontent-type: Text/Plain ; Charset=UTF-8"),
    ];
    for (name, text) in seeds {
        write(dir, name, text.as_bytes());
    }
}

fn router(dir: &Path) {
    // The first byte picks the method: 0 GET, 1 HEAD, 2 PUT, 3 POST, 4 DELETE, 5 OPTIONS, 6 PATCH.
    let seeds: &[(&str, u8, &str)] = &[
        ("bucket", 2, "/demo-bucket"),
        ("stream_read", 0, "/demo/hello%20world?offset=-1&live=sse&cursor=abc"),
        ("long_poll", 0, "/demo/s?offset=00000000000000000005&live=long-poll&timeout_ms=999999&max_bytes=0"),
        ("leader_read", 1, "/demo/s?offset=now&consistency=leader"),
        ("snapshot", 2, "/demo/s/snapshot/00000000000000000001"),
        ("snapshot_parts", 3, "/demo/s/snapshot/00000000000000000001/parts"),
        ("discard_parts", 4, "/demo/s/snapshot/parts"),
        ("retention", 2, "/demo/s/retention/00000000000000000010"),
        ("bootstrap", 0, "/demo/s/bootstrap"),
        ("chunk", 0, "/demo/s/incarnation/4503599627370496/chunk/00000000000000000000"),
        ("immutable_snapshot", 1, "/demo/s/incarnation/4503599627370496/snapshot/00000000000000000000"),
        ("ops", 0, "/__ursula/metrics"),
        ("escapes", 3, "/demo/%25?cursor=a+b%2Bc&incarnation=1"),
        ("malformed", 5, "/demo/a%2/snapshot/%zz?offset=0%201&offset=-1&record=1"),
    ];
    for (name, method, target) in seeds {
        let mut bytes = vec![*method];
        bytes.extend_from_slice(target.as_bytes());
        write(dir, name, &bytes);
    }
}

fn wal_frame(dir: &Path) {
    const SEPARATOR: &[u8] = b"--SEG--\n";
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = WalOptions {
        dir: tmp.path().to_path_buf(),
        fsync: Fsync::Never,
        segment_size: 4096,
        cut_damage_before_valid_frames: false,
    };
    let (wal, _) = Wal::open(options).expect("opens");
    let wait = |f: &dyn Fn(ursula_wal::Done)| {
        let (tx, rx) = mpsc::channel();
        f(Box::new(move |r| {
            let _ = tx.send(r);
        }));
        rx.recv().expect("done").expect("written");
    };
    wait(&|done| wal.set_state(1, 0, Bytes::from_static(b"vote:3"), done));
    wait(&|done| wal.append(1, (1..=4).map(|i| (i, Bytes::from(vec![b'a'; 40 * i as usize]))).collect(), false, done));
    wait(&|done| wal.append(2, vec![(1, Bytes::from_static(b"other group"))], false, done));
    wait(&|done| wal.truncate(1, 4, done));
    wait(&|done| wal.append(1, vec![(4, Bytes::from_static(b"overwritten")), (5, Bytes::new())], false, done));
    wait(&|done| wal.purge(1, 2, Bytes::from_static(b"purged up to 2"), done));
    wal.close().expect("closes");
    let mut segments: Vec<(u64, Vec<u8>)> = Vec::new();
    for entry in std::fs::read_dir(tmp.path()).expect("reads") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        if let Some(seq) = name.strip_prefix("segment-").and_then(|n| n.strip_suffix(".wal")) {
            segments.push((seq.parse().expect("a number"), std::fs::read(&path).expect("reads")));
        }
    }
    segments.sort();
    let first = segments[0].0;
    assert!(first <= 16, "the seed's first segment must be within 1..=16");
    let mode = (first - 1) as u8;
    let one = &segments[0].1;
    write(dir, "writer_segment", &[&[mode][..], one].concat());
    // The same journal, rotated into more segments by a second writer run.
    let tmp2 = tempfile::tempdir().expect("tempdir");
    let options = WalOptions {
        dir: tmp2.path().to_path_buf(),
        fsync: Fsync::Never,
        segment_size: 4096,
        cut_damage_before_valid_frames: false,
    };
    let (wal, _) = Wal::open(options).expect("opens");
    wait(&|done| wal.set_state(3, 1, Bytes::from_static(b"membership"), done));
    for i in 1..=3u64 {
        wait(&|done| wal.append(3, vec![(i, Bytes::from(vec![b'x'; 3000]))], false, done));
    }
    wait(&|done| wal.purge(3, 1, Bytes::from_static(b"m"), done));
    wal.close().expect("closes");
    let mut rotated: Vec<(u64, Vec<u8>)> = std::fs::read_dir(tmp2.path())
        .expect("reads")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            let seq = name.strip_prefix("segment-")?.strip_suffix(".wal")?.parse().ok()?;
            Some((seq, std::fs::read(&path).ok()?))
        })
        .collect();
    rotated.sort();
    let mut joined = vec![(rotated[0].0 - 1) as u8];
    for (i, (_, data)) in rotated.iter().enumerate() {
        if i > 0 {
            joined.extend_from_slice(SEPARATOR);
        }
        joined.extend_from_slice(data);
    }
    write(dir, "writer_rotated_segments", &joined);
    // A torn tail: the last frame cut short.
    let mut torn = vec![mode];
    torn.extend_from_slice(&one[..one.len() - 3]);
    write(dir, "torn_tail", &torn);
    // A bit flipped in the middle of the segment: corruption, not a torn tail.
    let mut flipped = vec![mode];
    flipped.extend_from_slice(one);
    flipped[1 + 30] ^= 0x10;
    write(dir, "flipped_bit", &flipped);
    // Structured mode (high bit): a few bytes for `arbitrary` to grow.
    write(dir, "structured", &[0x80, 0, 3, 1, 1, 0, 2, 0, 7, 3, 1, 2, 3, 4, 0, 5, 0, 0, 0, 0]);
}

/// Real values, made by applying commands to a store.
struct Values {
    create: CreateStream,
    append: AppendStream,
    publish: PublishSnapshot,
    commands: Vec<Command>,
    store: StreamStore,
    key: StreamKey,
    outcomes: Vec<Outcome>,
}

impl Values {
    fn new() -> Values {
        let key = StreamKey::parse("demo", "events").expect("a key");
        let json = ContentType::parse("application/json").expect("a content type");
        let create = CreateStream {
            key: key.clone(),
            content_type: json.clone(),
            lifetime: Lifetime::Ttl { secs: 3600 },
            closed: false,
            stream_seq: StreamSeq::parse(b"0001").expect("short"),
            body: Body::prepare(Some(&json), Bytes::from_static(b"[{\"a\":1}, 2]")),
            expect: None,
        };
        let append = AppendStream {
            key: key.clone(),
            content_type: Some(json.clone()),
            body: Body::Json(Ok(JsonBatch { text: Bytes::from_static(b"\"x\"\n"), count: 1 })),
            close: false,
            stream_seq: StreamSeq::parse(b"0002").expect("short"),
            producer: Some(ProducerHeaders { id: "writer-1".into(), epoch: 1, seq: 0, digest: None }),
            expect: None,
        };
        let mut store = StreamStore::new(7);
        let mut outcomes = Vec::new();
        let ctx = |i| ApplyCtx { now_ms: 1_700_000_000_000 + i, log_index: i };
        outcomes.push(store.apply(Command::Create(create.clone()), ctx(1)));
        let incarnation = store.head(&key, ctx(2).now_ms).expect("created").incarnation;
        outcomes.push(store.apply(Command::Append(append.clone()), ctx(2)));
        let body = Bytes::from_static(b"{\"state\":\"snapshot\"}\n");
        let publish = PublishSnapshot {
            key: key.clone(),
            offset: store.head(&key, ctx(3).now_ms).expect("exists").tail,
            digest: SnapshotDigest::of(&json, &body),
            content_type: json.clone(),
            body,
            expect: Some(incarnation),
            cold: None,
        };
        outcomes.push(store.apply(Command::PublishSnapshot(publish.clone()), ctx(3)));
        let bytes_key = StreamKey::parse("demo", "bytes").expect("a key");
        let commands = vec![
            Command::Create(create.clone()),
            Command::Append(append.clone()),
            Command::PublishSnapshot(publish.clone()),
            Command::Create(CreateStream {
                key: bytes_key.clone(),
                content_type: ContentType::octet_stream(),
                lifetime: Lifetime::ExpiresAt { at_ms: 1_900_000_000_000 },
                closed: true,
                stream_seq: None,
                body: Body::Bytes(Bytes::from_static(b"\x00\x01binary")),
                expect: Incarnation::from_value(1 << 52),
            }),
            Command::AdvanceRetention(AdvanceRetention { key: key.clone(), offset: Offset(4), expect: None }),
            Command::Renew(RenewStream { key: key.clone(), incarnation }),
            Command::Delete(DeleteStream { key: bytes_key, expect: Some(incarnation) }),
            Command::Sweep,
        ];
        Values { create, append, publish, commands, store, key, outcomes }
    }
}

fn postcard_record<T: Serialize>(version: u8, value: &T) -> Vec<u8> {
    postcard::to_extend(value, vec![version]).expect("encodes")
}

fn raft_command(dir: &Path, v: &Values) {
    #[derive(Serialize)]
    struct LogIdRepr {
        term: u64,
        node: u64,
        index: u64,
    }
    #[derive(Serialize)]
    struct MembershipRepr {
        configs: Vec<Vec<u64>>,
        nodes: Vec<(u64, String)>,
    }
    #[derive(Serialize)]
    struct Proposal<'a> {
        now_ms: u64,
        command: &'a Command,
    }
    #[derive(Serialize)]
    enum Payload<'a> {
        #[allow(dead_code)]
        Blank,
        Normal(Proposal<'a>),
        Membership(MembershipRepr),
    }
    #[derive(Serialize)]
    struct SnapshotHead {
        last_log_id: Option<LogIdRepr>,
        membership_log_id: Option<LogIdRepr>,
        membership: MembershipRepr,
        snapshot_id: String,
    }
    let membership = || MembershipRepr { configs: vec![vec![1, 2, 3]], nodes: vec![(1, "10.0.0.1:4438".into())] };
    for (i, command) in v.commands.iter().enumerate() {
        write(dir, &format!("command_{i}"), &postcard_record(1, command));
    }
    let id = LogIdRepr { term: 3, node: 1, index: 9 };
    let entry = (&id, Payload::Normal(Proposal { now_ms: 42, command: &v.commands[1] }));
    write(dir, "entry_normal", &postcard_record(1, &entry));
    let entry = (&id, Payload::Membership(membership()));
    write(dir, "entry_membership", &postcard_record(1, &entry));
    write(dir, "vote", &postcard_record(1, &(5u64, 1u64, true)));
    write(dir, "log_id", &postcard_record(1, &id));
    let head = SnapshotHead {
        last_log_id: Some(LogIdRepr { term: 3, node: 1, index: 9 }),
        membership_log_id: Some(LogIdRepr { term: 1, node: 1, index: 1 }),
        membership: membership(),
        snapshot_id: "3-9".into(),
    };
    write(dir, "snapshot_meta", &postcard_record(1, &head));
    let snapshot = postcard_record(4, &(&head, &v.store));
    write(dir, "snapshot_v4", &snapshot);
    // Older formats, as the codec's unit test makes them from an empty store.
    let empty = postcard_record(4, &(&head, &StreamStore::new(7)));
    let mut third = empty.clone();
    third.truncate(third.len() - 2);
    third[0] = 3;
    write(dir, "snapshot_v3", &third);
    let mut second = third.clone();
    second.truncate(second.len() - 1);
    second[0] = 2;
    write(dir, "snapshot_v2", &second);
    let mut first = second.clone();
    first.truncate(first.len() - 3);
    first[0] = 1;
    write(dir, "snapshot_v1", &first);
}

fn wire_types(dir: &Path, v: &Values) {
    let seed = |which: u8, name: &str, bytes: Bytes| write(dir, name, &[&[which][..], &bytes].concat());
    seed(0, "create", wire::encode(&v.create));
    seed(1, "append", wire::encode(&v.append));
    seed(2, "delete", wire::encode(&DeleteStream { key: v.key.clone(), expect: None }));
    seed(3, "publish_snapshot", wire::encode(&v.publish));
    seed(
        4,
        "advance_retention",
        wire::encode(&AdvanceRetention { key: v.key.clone(), offset: Offset(4), expect: None }),
    );
    let incarnation = v.store.head(&v.key, 1_700_000_000_004).expect("exists").incarnation;
    seed(
        5,
        "part_admission",
        wire::encode(&PartAdmission { key: v.key.clone(), expect: Some(incarnation), declared: 9 }),
    );
    seed(
        6,
        "staged_part",
        wire::encode(&StagedPart { key: v.key.clone(), expect: None, body: Bytes::from_static(b"part") }),
    );
    let json = ContentType::parse("application/json").expect("a content type");
    seed(
        7,
        "parts_commit",
        wire::encode(&PartsCommit {
            key: v.key.clone(),
            offset: Offset(10),
            digest: SnapshotDigest::of(&json, b"{}\n"),
            content_type: json,
            expect: Some(incarnation),
            parts: vec!["p-1".into(), "p-2".into()],
        }),
    );
    seed(8, "parts_discard", wire::encode(&PartsDiscard { key: v.key.clone(), expect: None }));
    let query =
        ReadQuery { from: ReadFrom::Start, max_bytes: 1 << 20, boundary: Boundary::Message, whole_json_messages: true };
    seed(9, "read_query", wire::encode(&query));
    for outcome in &v.outcomes {
        match outcome {
            Outcome::Create(Ok(ok)) => seed(10, "create_ok", wire::encode(ok)),
            Outcome::Append(Ok(ok)) => seed(11, "append_ok", wire::encode(ok)),
            Outcome::PublishSnapshot(Ok(ok)) => seed(12, "snapshot_ok", wire::encode(ok)),
            other => panic!("a seed command failed: {other:?}"),
        }
    }
    let now = 1_700_000_000_004;
    let info = v.store.head(&v.key, now).expect("exists");
    seed(13, "stream_info", wire::encode(&info));
    let view = v.store.read(&v.key, query, now).expect("reads");
    seed(14, "read_view", wire::encode(&view));
    let snapshot = v.store.snapshot(&v.key, info.snapshot.expect("published").offset, now).expect("a snapshot");
    seed(15, "snapshot_view", wire::encode(&snapshot));
    seed(16, "bootstrap_view", wire::encode(&v.store.bootstrap(&v.key, 1 << 20, now).expect("bootstraps")));
    seed(17, "part_staged", wire::encode(&PartStaged { id: "p-1".into(), info }));
    seed(18, "rejection", wire::encode(&Rejection::ProducerSeqGap { expected: 4, received: 9 }));
    seed(18, "rejection_closed", wire::encode(&Rejection::StreamClosed { tail: Offset(77) }));
    seed(19, "parts_refusal", wire::encode(&PartsRefusal::StagedLimit { incarnation, bytes: true, limit: 7 }));
}
