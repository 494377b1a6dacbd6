//! How a group's Raft records are written to the WAL and to snapshot
//! files: postcard over small mirror types, behind a version byte.
//! Persisted: never reorder variants or fields; add new versions instead.

use std::collections::BTreeSet;

use bytes::Bytes;
use openraft::vote::RaftLeaderId;
use openraft::vote::leader_id_adv::CommittedLeaderId;
use openraft::{BasicNode, EntryPayload, Membership};
use serde::{Deserialize, Serialize};

use super::types::{Entry, LogId, Proposal, StoredMembership, Vote};
use ursula_stream::Command;

const VERSION: u8 = 1;
/// Snapshots whose store records its last accepted loss (spec/35
/// "Recovering after a host crash"); version 5 (forks) decodes as
/// `StoreWithoutHistoryEvent`, version 4 (history rewrites, no forks) as
/// `StoreWithoutForks`, version 3 (purge fences, no rewrites) as
/// `StoreWithoutRewrites`, version 2 (committed usage, no fences) as
/// `StoreWithoutFences`, version 1 as `LegacyStreamStore` (counters at zero).
const SNAPSHOT_VERSION: u8 = 6;
const SNAPSHOT_VERSION_WITHOUT_HISTORY_EVENT: u8 = 5;
const SNAPSHOT_VERSION_WITHOUT_FORKS: u8 = 4;
const SNAPSHOT_VERSION_WITHOUT_REWRITES: u8 = 3;
const SNAPSHOT_VERSION_WITHOUT_FENCES: u8 = 2;

#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot encode or decode {what}: {reason}")]
pub struct CodecError {
    pub what: &'static str,
    pub reason: String,
}

#[derive(Serialize, Deserialize)]
struct LogIdRepr {
    term: u64,
    node: u64,
    index: u64,
}

#[derive(Serialize, Deserialize)]
struct MembershipRepr {
    configs: Vec<Vec<u64>>,
    nodes: Vec<(u64, String)>,
}

#[derive(Serialize)]
enum PayloadOut<'a> {
    Blank,
    Normal(&'a Proposal),
    Membership(MembershipRepr),
}

/// Decoded once and moved into an `Entry` at once; its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Deserialize)]
enum PayloadIn {
    Blank,
    Normal(Proposal),
    Membership(MembershipRepr),
}

impl From<&LogId> for LogIdRepr {
    fn from(id: &LogId) -> Self {
        LogIdRepr { term: id.leader_id.term, node: id.leader_id.node_id, index: id.index }
    }
}

impl From<LogIdRepr> for LogId {
    fn from(r: LogIdRepr) -> Self {
        LogId::new(CommittedLeaderId::new(r.term, r.node), r.index)
    }
}

impl From<&Membership<u64, BasicNode>> for MembershipRepr {
    fn from(m: &Membership<u64, BasicNode>) -> Self {
        MembershipRepr {
            configs: m.get_joint_config().iter().map(|c| c.iter().copied().collect()).collect(),
            nodes: m.nodes().map(|(id, n)| (*id, n.addr.clone())).collect(),
        }
    }
}

impl From<MembershipRepr> for Membership<u64, BasicNode> {
    fn from(r: MembershipRepr) -> Self {
        let configs: Vec<BTreeSet<u64>> = r.configs.into_iter().map(|c| c.into_iter().collect()).collect();
        let nodes: std::collections::BTreeMap<u64, BasicNode> =
            r.nodes.into_iter().map(|(id, addr)| (id, BasicNode { addr })).collect();
        // A membership this build wrote: its configs name only its nodes.
        Membership::new(configs, nodes).unwrap_or_default()
    }
}

fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<Bytes, CodecError> {
    encode_into(what, value, 0)
}

/// As `encode`, with room for `size_hint` bytes from the start: an append's
/// entry grew its vector several times while postcard wrote the body.
fn encode_into<T: Serialize>(what: &'static str, value: &T, size_hint: usize) -> Result<Bytes, CodecError> {
    encode_locating(what, value, size_hint, None).map(|(raw, _)| raw)
}

/// As `encode_into`, also answering where in the output the bytes at
/// `watched` (address and length of a slice the value holds) were written.
fn encode_locating<T: Serialize>(
    what: &'static str,
    value: &T,
    size_hint: usize,
    watched: Option<(usize, usize)>,
) -> Result<(Bytes, Option<usize>), CodecError> {
    let mut out = Vec::with_capacity(size_hint.max(1));
    out.push(VERSION);
    let flavor = SliceCopies { out, watched, found: None };
    postcard::serialize_with_flavor(value, flavor)
        .map(|(out, found)| (Bytes::from(out), found))
        .map_err(|e| CodecError { what, reason: e.to_string() })
}

/// A postcard output that copies each run of bytes in one go: postcard's
/// `to_extend` feeds them to `Extend` one at a time, which in a test build
/// (unoptimized) held the Raft runtime over every copy of a 32 MiB entry
/// (its WAL record and each peer's request) long enough for its peers'
/// heartbeats to time out and elect another leader.
/// It also notes where the run at the `watched` address (start, length)
/// landed.
struct SliceCopies {
    out: Vec<u8>,
    watched: Option<(usize, usize)>,
    found: Option<usize>,
}

impl postcard::ser_flavors::Flavor for SliceCopies {
    type Output = (Vec<u8>, Option<usize>);

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        self.out.push(byte);
        Ok(())
    }

    fn try_extend(&mut self, bytes: &[u8]) -> postcard::Result<()> {
        if self.found.is_none() && self.watched == Some((bytes.as_ptr() as usize, bytes.len())) {
            self.found = Some(self.out.len());
        }
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Self::Output> {
        Ok((self.out, self.found))
    }
}

/// Bytes an entry's encoding takes about: an append's body and room for
/// its key, headers and the entry's own fields.
fn entry_size_hint(entry: &Entry) -> usize {
    const AROUND_THE_BODY: usize = 192;
    match &entry.payload {
        EntryPayload::Normal(Proposal { command: Command::Append(append), .. }) => AROUND_THE_BODY + append.body.len(),
        _ => AROUND_THE_BODY,
    }
}

fn decode<'a, T: Deserialize<'a>>(what: &'static str, bytes: &'a [u8]) -> Result<T, CodecError> {
    match bytes.split_first() {
        Some((&VERSION, rest)) => postcard::from_bytes(rest).map_err(|e| CodecError { what, reason: e.to_string() }),
        Some((v, _)) => Err(CodecError { what, reason: format!("unknown format version {v}") }),
        None => Err(CodecError { what, reason: "empty record".into() }),
    }
}

/// A command a follower forwards to its leader (`ForwardCommand`).
pub fn encode_command(command: &Command) -> Result<Bytes, CodecError> {
    encode("forwarded command", command)
}

pub fn decode_command(bytes: &[u8]) -> Result<Command, CodecError> {
    decode("forwarded command", bytes)
}

/// The entry's record: the one its leader's log made (`record_entry`) or
/// its peer sent, or a fresh encoding.
pub fn encode_entry(entry: &Entry) -> Result<Bytes, CodecError> {
    match kept_record(entry) {
        Some(raw) => Ok(raw),
        None => encode_entry_locating(entry, None).map(|(raw, _)| raw),
    }
}

/// The record a log kept with this entry, for its log id.
fn kept_record(entry: &Entry) -> Option<Bytes> {
    match &entry.payload {
        EntryPayload::Normal(p) => p.record.of(&entry.log_id),
        _ => None,
    }
}

/// Encodes the entry a log appends and keeps the record with it, pointing
/// its payload at the record's copy of those bytes: the entry, the record
/// and every peer's request then share one buffer (three voters encoded
/// and held each 32 MiB append three times over before).
pub fn record_entry(entry: &mut Entry) -> Result<Bytes, CodecError> {
    if let Some(raw) = kept_record(entry) {
        return Ok(raw);
    }
    let watched = match &mut entry.payload {
        EntryPayload::Normal(p) => p.command.payload_mut().map(|b| (b.as_ptr() as usize, b.len())),
        _ => None,
    };
    let (raw, at) = encode_entry_locating(entry, watched)?;
    if let EntryPayload::Normal(p) = &mut entry.payload {
        if let (Some(payload), Some(at)) = (p.command.payload_mut(), at) {
            *payload = raw.slice(at..at + payload.len());
        }
        p.record.keep(entry.log_id, raw.clone());
    }
    Ok(raw)
}

fn encode_entry_locating(entry: &Entry, watched: Option<(usize, usize)>) -> Result<(Bytes, Option<usize>), CodecError> {
    let payload = match &entry.payload {
        EntryPayload::Blank => PayloadOut::Blank,
        EntryPayload::Normal(p) => PayloadOut::Normal(p),
        EntryPayload::Membership(m) => PayloadOut::Membership(m.into()),
    };
    let entry_out = (LogIdRepr::from(&entry.log_id), payload);
    encode_locating("log entry", &entry_out, entry_size_hint(entry), watched)
}

/// Decodes an entry a peer sent, keeping `raw` with it for the log's
/// write (`record_entry` hands it back) instead of an encoding of its own;
/// the log then forgets it (`forget_received`). The body is a copy: a
/// slice of the request would hold the whole request for as long as the
/// entry's bytes stay hot.
pub fn decode_received_entry(raw: &Bytes) -> Result<Entry, CodecError> {
    let entry = decode_entry(raw)?;
    if let EntryPayload::Normal(p) = &entry.payload {
        p.record.keep_received(entry.log_id, raw.clone());
    }
    Ok(entry)
}

/// Drops a received record (`decode_received_entry`) once written: the
/// log keeps the entry, and it must not hold its peer's request.
pub fn forget_received(entry: &mut Entry) {
    if let EntryPayload::Normal(p) = &mut entry.payload
        && p.record.is_received()
    {
        p.record = super::types::Record::default();
    }
}

pub fn decode_entry(bytes: &[u8]) -> Result<Entry, CodecError> {
    let (id, payload): (LogIdRepr, PayloadIn) = decode("log entry", bytes)?;
    let payload = match payload {
        PayloadIn::Blank => EntryPayload::Blank,
        PayloadIn::Normal(p) => EntryPayload::Normal(p),
        PayloadIn::Membership(m) => EntryPayload::Membership(m.into()),
    };
    Ok(Entry { log_id: id.into(), payload })
}

pub fn encode_log_id(id: &LogId) -> Result<Bytes, CodecError> {
    encode("log id", &LogIdRepr::from(id))
}

pub fn decode_log_id(bytes: &[u8]) -> Result<LogId, CodecError> {
    decode::<LogIdRepr>("log id", bytes).map(LogId::from)
}

pub fn encode_vote(vote: &Vote) -> Result<Bytes, CodecError> {
    encode("vote", &(vote.leader_id.term, vote.leader_id.node_id, vote.committed))
}

pub fn decode_vote(bytes: &[u8]) -> Result<Vote, CodecError> {
    let (term, node, committed): (u64, u64, bool) = decode("vote", bytes)?;
    Ok(if committed { Vote::new_committed(term, node) } else { Vote::new(term, node) })
}

/// The parts of a snapshot besides the store, for the snapshot file.
#[derive(Serialize, Deserialize)]
struct SnapshotHead {
    last_log_id: Option<LogIdRepr>,
    membership_log_id: Option<LogIdRepr>,
    membership: MembershipRepr,
    snapshot_id: String,
}

pub fn encode_snapshot(
    last_log_id: Option<&LogId>,
    membership: &StoredMembership,
    snapshot_id: &str,
    store: &ursula_stream::StreamStore,
) -> Result<Bytes, CodecError> {
    let mut body = Vec::new();
    write_snapshot(&mut body, last_log_id, membership, snapshot_id, store)?;
    Ok(Bytes::from(body))
}

/// The same encoding written to `out` as it is made (a snapshot file).
pub fn write_snapshot(
    out: &mut dyn std::io::Write,
    last_log_id: Option<&LogId>,
    membership: &StoredMembership,
    snapshot_id: &str,
    store: &ursula_stream::StreamStore,
) -> Result<(), CodecError> {
    let head = SnapshotHead {
        last_log_id: last_log_id.map(LogIdRepr::from),
        membership_log_id: membership.log_id().as_ref().map(LogIdRepr::from),
        membership: membership.membership().into(),
        snapshot_id: snapshot_id.to_string(),
    };
    let failed = |reason: String| CodecError { what: "snapshot", reason };
    out.write_all(&[SNAPSHOT_VERSION]).map_err(|e| failed(e.to_string()))?;
    postcard::to_io(&(head, store), out).map(drop).map_err(|e| failed(e.to_string()))
}

/// A snapshot's meta alone, for sending it to a peer.
pub fn encode_snapshot_meta(meta: &super::types::SnapshotMeta) -> Result<Bytes, CodecError> {
    let head = SnapshotHead {
        last_log_id: meta.last_log_id.as_ref().map(LogIdRepr::from),
        membership_log_id: meta.last_membership.log_id().as_ref().map(LogIdRepr::from),
        membership: meta.last_membership.membership().into(),
        snapshot_id: snapshot_id(meta.last_log_id.as_ref()),
    };
    encode("snapshot meta", &head)
}

pub fn decode_snapshot_meta(bytes: &[u8]) -> Result<super::types::SnapshotMeta, CodecError> {
    let head: SnapshotHead = decode("snapshot meta", bytes)?;
    Ok(super::types::SnapshotMeta {
        last_log_id: head.last_log_id.map(LogId::from),
        last_membership: StoredMembership::new(head.membership_log_id.map(LogId::from), head.membership.into()),
    })
}

/// A snapshot's name in its file and in logs: the log id it ends at.
pub fn snapshot_id(last_log_id: Option<&LogId>) -> String {
    last_log_id.map_or_else(|| "empty".to_string(), |l| format!("{}-{}", l.leader_id.term, l.index))
}

pub struct DecodedSnapshot {
    pub last_log_id: Option<LogId>,
    pub membership: StoredMembership,
    pub store: ursula_stream::StreamStore,
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<DecodedSnapshot, CodecError> {
    let failed = |e: postcard::Error| CodecError { what: "snapshot", reason: e.to_string() };
    let (head, store): (SnapshotHead, ursula_stream::StreamStore) = match bytes.split_first() {
        Some((&SNAPSHOT_VERSION, rest)) => postcard::from_bytes(rest).map_err(failed)?,
        Some((&SNAPSHOT_VERSION_WITHOUT_HISTORY_EVENT, rest)) => {
            let (head, old): (SnapshotHead, ursula_stream::store::StoreWithoutHistoryEvent) =
                postcard::from_bytes(rest).map_err(failed)?;
            (head, old.into())
        }
        Some((&SNAPSHOT_VERSION_WITHOUT_FORKS, rest)) => {
            let (head, old): (SnapshotHead, ursula_stream::store::StoreWithoutForks) =
                postcard::from_bytes(rest).map_err(failed)?;
            (head, old.into())
        }
        Some((&SNAPSHOT_VERSION_WITHOUT_REWRITES, rest)) => {
            let (head, old): (SnapshotHead, ursula_stream::store::StoreWithoutRewrites) =
                postcard::from_bytes(rest).map_err(failed)?;
            (head, old.into())
        }
        Some((&SNAPSHOT_VERSION_WITHOUT_FENCES, rest)) => {
            let (head, old): (SnapshotHead, ursula_stream::store::StoreWithoutFences) =
                postcard::from_bytes(rest).map_err(failed)?;
            (head, old.into())
        }
        Some((&VERSION, rest)) => {
            let (head, legacy): (SnapshotHead, ursula_stream::store::LegacyStreamStore) =
                postcard::from_bytes(rest).map_err(failed)?;
            (head, legacy.into())
        }
        Some((v, _)) => {
            return Err(CodecError { what: "snapshot", reason: format!("unknown format version {v}") });
        }
        None => return Err(CodecError { what: "snapshot", reason: "empty record".into() }),
    };
    // The unit is part of the counters' contract (spec/35): never converted.
    if store.write_unit_bytes() != ursula_stream::usage::WRITE_UNIT_BYTES {
        return Err(CodecError {
            what: "snapshot",
            reason: format!(
                "its usage counters are in write units of {} bytes, this build's are {}",
                store.write_unit_bytes(),
                ursula_stream::usage::WRITE_UNIT_BYTES
            ),
        });
    }
    Ok(DecodedSnapshot {
        last_log_id: head.last_log_id.map(LogId::from),
        membership: StoredMembership::new(head.membership_log_id.map(LogId::from), head.membership.into()),
        store,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ursula_stream::StreamKey;

    #[test]
    fn records_round_trip() {
        let key = StreamKey::parse("bucket-1", "s").expect("valid key");
        let proposal = Proposal::new(42, Command::Delete(ursula_stream::DeleteStream { key, expect: None }));
        let entry =
            Entry { log_id: LogId::new(CommittedLeaderId::new(3, 1), 9), payload: EntryPayload::Normal(proposal) };
        let back = decode_entry(&encode_entry(&entry).expect("encodes")).expect("decodes");
        assert_eq!(back.log_id, entry.log_id);
        assert!(matches!(back.payload, EntryPayload::Normal(Proposal { now_ms: 42, .. })));

        let nodes: std::collections::BTreeMap<u64, BasicNode> = [(1, BasicNode { addr: "a".into() })].into();
        let m = Membership::new(vec![[1u64].into()], nodes).expect("a membership");
        let entry =
            Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), 1), payload: EntryPayload::Membership(m.clone()) };
        let back = decode_entry(&encode_entry(&entry).expect("encodes")).expect("decodes");
        assert!(matches!(back.payload, EntryPayload::Membership(got) if got == m));

        let vote = Vote::new_committed(5, 1);
        assert_eq!(decode_vote(&encode_vote(&vote).expect("encodes")).expect("decodes"), vote);
        let id = LogId::new(CommittedLeaderId::new(2, 1), 77);
        assert_eq!(decode_log_id(&encode_log_id(&id).expect("encodes")).expect("decodes"), id);
    }

    #[test]
    fn a_recorded_entry_shares_its_body_with_its_record_which_peers_reuse() {
        let key = StreamKey::parse("bucket-1", "s").expect("valid key");
        let body = Bytes::from(vec![7u8; 100_000]);
        let append = ursula_stream::AppendStream {
            key,
            content_type: None,
            body: ursula_stream::Body::Bytes(body.clone()),
            close: false,
            stream_seq: None,
            producer: None,
            expect: None,
        };
        let log_id = LogId::new(CommittedLeaderId::new(3, 1), 9);
        let mut entry = Entry { log_id, payload: EntryPayload::Normal(Proposal::new(42, Command::Append(append))) };
        let fresh = encode_entry(&entry).expect("encodes");
        let record = record_entry(&mut entry).expect("encodes");
        assert_eq!(record, fresh, "the record is the entry's usual encoding");

        let EntryPayload::Normal(Proposal { command: Command::Append(a), .. }) = &entry.payload else {
            panic!("an append")
        };
        let ursula_stream::Body::Bytes(held) = &a.body else { panic!("a byte body") };
        assert_eq!(held, &body);
        let inside = record.as_ptr_range();
        assert!(inside.contains(&held.as_ptr()), "the entry's body is the record's copy");

        // A peer's request (a clone of the cached entry) sends the record itself.
        let sent = encode_entry(&entry.clone()).expect("encodes");
        assert_eq!(sent.as_ptr(), record.as_ptr());
        // An entry with another log id (re-proposed) is encoded afresh.
        let mut other = entry.clone();
        other.log_id = LogId::new(CommittedLeaderId::new(4, 2), 9);
        let again = encode_entry(&other).expect("encodes");
        assert_ne!(again.as_ptr(), record.as_ptr());
        assert_eq!(decode_entry(&again).expect("decodes").log_id, other.log_id);
    }

    /// A follower writes the bytes its leader sent instead of encoding the
    /// entry again, and keeps neither them nor a body pointing into them.
    #[test]
    fn a_received_entry_is_written_as_received_and_then_forgotten() {
        let append = ursula_stream::AppendStream {
            key: StreamKey::parse("bucket-1", "s").expect("valid key"),
            content_type: None,
            body: ursula_stream::Body::Bytes(Bytes::from(vec![5u8; 50_000])),
            close: false,
            stream_seq: None,
            producer: None,
            expect: None,
        };
        let log_id = LogId::new(CommittedLeaderId::new(2, 1), 4);
        let sent = Entry { log_id, payload: EntryPayload::Normal(Proposal::new(7, Command::Append(append))) };
        // As a request carries it: one entry among others in one buffer.
        let mut request = b"other entries".to_vec();
        request.extend_from_slice(&encode_entry(&sent).expect("encodes"));
        let request = Bytes::from(request);
        let raw = request.slice(13..);

        let mut entry = decode_received_entry(&raw).expect("decodes");
        let EntryPayload::Normal(Proposal { command: Command::Append(a), .. }) = &entry.payload else {
            panic!("an append")
        };
        let ursula_stream::Body::Bytes(body) = &a.body else { panic!("a byte body") };
        assert!(!request.as_ptr_range().contains(&body.as_ptr()), "the body is a copy, not a slice of the request");
        let written = record_entry(&mut entry).expect("a record");
        assert_eq!(written.as_ptr(), raw.as_ptr(), "the log writes the received bytes");
        forget_received(&mut entry);
        let again = encode_entry(&entry).expect("encodes");
        assert_ne!(again.as_ptr(), raw.as_ptr(), "nothing of the request is kept");
        assert_eq!(again, raw, "and an encoding of its own is the same bytes");
        // A leader's own record is not forgotten.
        let mut own = sent.clone();
        let kept = record_entry(&mut own).expect("a record");
        forget_received(&mut own);
        assert_eq!(encode_entry(&own).expect("encodes").as_ptr(), kept.as_ptr());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [&b""[..], &[9, 1, 2][..], &[VERSION, 0xff, 0xff, 0xff][..]] {
            assert!(decode_entry(bad).is_err());
            assert!(decode_vote(bad).is_err());
            assert!(decode_snapshot(bad).is_err());
        }
    }

    /// Snapshots written before accepted losses (format 5), forks (format 4), history rewrites (format 3), purge
    /// fences (format 2) and committed usage (format 1) still restore; one in another write unit is refused.
    #[test]
    fn snapshots_of_earlier_formats_restore_and_another_unit_is_refused() {
        let membership = StoredMembership::default();
        let store = ursula_stream::StreamStore::new(7);
        let current = encode_snapshot(None, &membership, "s-1", &store).expect("a snapshot");
        assert_eq!(current[0], SNAPSHOT_VERSION);
        assert_eq!(decode_snapshot(&current).expect("format 6").store, store);
        // Format 5 is format 6 without the trailing history event (none: one byte).
        let mut fifth = current.to_vec();
        fifth.truncate(fifth.len() - 1);
        fifth[0] = SNAPSHOT_VERSION_WITHOUT_HISTORY_EVENT;
        assert_eq!(decode_snapshot(&fifth).expect("format 5").store, store, "no history event");
        // Format 4 differs only in each stream's trailing fork links: with
        // no stream, in the version byte alone.
        let mut fourth = fifth.clone();
        fourth[0] = SNAPSHOT_VERSION_WITHOUT_FORKS;
        assert_eq!(decode_snapshot(&fourth).expect("format 4").store, store, "no forks");
        // Format 3 is format 4 without the trailing rewrites (an empty map
        // and no import digest: one byte each).
        let mut third = fifth.clone();
        third.truncate(third.len() - 2);
        third[0] = SNAPSHOT_VERSION_WITHOUT_REWRITES;
        assert_eq!(decode_snapshot(&third).expect("format 3").store, store, "no rewrites");
        // Format 2 is format 3 without the trailing fence set (empty: one byte).
        let mut second = third.clone();
        second.truncate(second.len() - 1);
        second[0] = SNAPSHOT_VERSION_WITHOUT_FENCES;
        assert_eq!(decode_snapshot(&second).expect("format 2").store, store, "no fences");
        // Format 1 is format 2 without the trailing usage map (empty: one
        // byte) and unit (10240: two varint bytes).
        let mut first = second.clone();
        first.truncate(first.len() - 3);
        first[0] = VERSION;
        let restored = decode_snapshot(&first).expect("format 1");
        assert_eq!(restored.store, store, "an empty store, its counters at zero");
        let mut other_unit = current.to_vec();
        let n = other_unit.len();
        other_unit[n - 6..n - 4].copy_from_slice(&[0x80, 0x20]);
        let refused = decode_snapshot(&other_unit).map(|_| ()).expect_err("another unit");
        assert!(refused.reason.contains("4096"), "{refused}");
    }
}
