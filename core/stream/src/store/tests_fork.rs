//! Forks in the store (upstream "Stream forking"; docs/forks.md): the two
//! steps of a create, reads that leave the source's part to the shell,
//! soft deletes and the release that collects a source.

use super::tests::{Harness, ct, key};
use super::*;
use crate::boundary::Boundary;
use crate::command::{CreateStream, DeleteStream};
use crate::fork::{CreateFork, ForkPrefix, ReferenceSource, ReleaseSource};
use crate::lifetime::Lifetime;
use crate::offset::ReadFrom;
use crate::outcome::ForkFault;

const ALL: ReadQuery =
    ReadQuery { from: ReadFrom::Start, max_bytes: u64::MAX, boundary: Boundary::Byte, whole_json_messages: false };

impl Harness {
    /// Both steps of a fork create as the shell runs them, releasing the
    /// reference when the create did not take it.
    fn fork(&mut self, source: &str, name: &str, offset: Option<u64>, sub_offset: u64) -> Result<CreateOk, Rejection> {
        let referenced = match self.apply(Command::ReferenceSource(ReferenceSource {
            source: key(source),
            fork: key(name),
            offset: offset.map(Offset),
            sub_offset,
            content_type: None,
        })) {
            Outcome::ReferenceSource(r) => r?,
            other => panic!("unexpected {other:?}"),
        };
        let create = CreateStream {
            key: key(name),
            content_type: referenced.content_type.clone(),
            lifetime: referenced.inherited_lifetime(None),
            closed: false,
            stream_seq: None,
            body: Body::Empty,
            expect: None,
        };
        let base = referenced.base.clone();
        let created = match self.apply(Command::CreateFork(CreateFork { create, base, offset_named: offset.is_some() }))
        {
            Outcome::Create(r) => r,
            other => panic!("unexpected {other:?}"),
        };
        if !created.as_ref().is_ok_and(|ok| ok.created) {
            self.release(source, referenced.base.reference);
        }
        created
    }

    fn release(&mut self, source: &str, reference: u64) -> Option<ForkBase> {
        match self.apply(Command::ReleaseSource(ReleaseSource { source: key(source), reference })) {
            Outcome::ReleaseSource { released } => released,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn delete(&mut self, name: &str) -> Result<Option<ForkBase>, Rejection> {
        match self.apply(Command::Delete(DeleteStream { key: key(name), expect: None })) {
            Outcome::Delete(r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A read stitched as the shell stitches it: the source's part first.
    fn read_stitched(&self, name: &str) -> String {
        let view = self.store.read(&key(name), ALL, self.now_ms).expect("readable");
        let own: String = view.chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        match &view.prefix {
            Some(prefix) => self.read_prefix(prefix) + &own,
            None => own,
        }
    }

    fn read_prefix(&self, prefix: &ForkPrefix) -> String {
        let view = self.store.read_fork_prefix(prefix, ALL).expect("source readable");
        assert_eq!(view.next, prefix.to, "a prefix is read to its fork point");
        let own: String = view.chunks.iter().map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        match &view.prefix {
            Some(inner) => self.read_prefix(inner) + &own,
            None => own,
        }
    }
}

#[test]
fn a_fork_reads_its_source_up_to_the_fork_point_then_its_own_appends() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "source", Lifetime::Forever, false).expect("source");
    let fork = h.fork("s", "f", None, 0).expect("fork");
    assert!(fork.created);
    assert_eq!(fork.info.tail, Offset(6), "the fork continues the source's offsets");
    h.append(Harness::append_cmd("s", Some("text/plain"), " later")).expect("source append");
    h.append(Harness::append_cmd("f", Some("text/plain"), " fork")).expect("fork append");
    assert_eq!(h.read_stitched("f"), "source fork");
    assert_eq!(h.read_all("s"), "source later", "the fork's appends are its own");
    let view = h.store.read(&key("f"), ReadQuery { from: ReadFrom::At(Offset(6)), ..ALL }, h.now_ms).expect("read");
    assert!(view.prefix.is_none(), "a read at the fork point is the fork's own");
    // A chain stitches through every level.
    h.fork("f", "g", None, 0).expect("fork of a fork");
    h.append(Harness::append_cmd("g", Some("text/plain"), "!")).expect("append");
    assert_eq!(h.read_stitched("g"), "source fork!");
}

#[test]
fn a_read_that_ends_inside_the_prefix_leaves_the_forks_own_bytes_for_later() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "abcdef", Lifetime::Forever, false).expect("source");
    h.fork("s", "f", None, 0).expect("fork");
    h.append(Harness::append_cmd("f", Some("text/plain"), "XYZ")).expect("append");
    let view = h.store.read(&key("f"), ReadQuery { max_bytes: 4, ..ALL }, h.now_ms).expect("read");
    assert!(view.chunks.is_empty() && view.next == Offset(6), "own part empty, the prefix has the budget");
    let prefix = view.prefix.expect("prefix");
    let source = h.store.read_fork_prefix(&prefix, ReadQuery { max_bytes: 4, ..ALL }).expect("source");
    assert_eq!(source.next, Offset(4));
    let view = h.store.read(&key("f"), ReadQuery { max_bytes: 8, ..ALL }, h.now_ms).expect("read");
    assert_eq!(view.next, Offset(8), "what the prefix leaves goes to the fork's own bytes");
}

#[test]
fn the_fork_point_takes_an_offset_and_a_sub_offset_within_one_append() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "first", Lifetime::Forever, false).expect("source");
    h.append(Harness::append_cmd("s", Some("text/plain"), "second")).expect("append");
    h.fork("s", "at", Some(5), 0).expect("at an offset");
    assert_eq!(h.read_stitched("at"), "first");
    h.fork("s", "sub", Some(5), 3).expect("with a sub-offset");
    assert_eq!(h.read_stitched("sub"), "firstsec");
    // A fork of a fork may take its point inside the inherited bytes.
    h.fork("sub", "subsub", Some(0), 4).expect("inside the inherited bytes");
    assert_eq!(h.read_stitched("subsub"), "firs");
    h.fork("s", "whole", Some(5), 6).expect("the whole append");
    assert_eq!(h.read_stitched("whole"), "firstsecond");
    let beyond = Err(Rejection::InvalidFork(ForkFault::SubOffsetBeyondAppend));
    assert_eq!(h.fork("s", "over", Some(5), 7), beyond, "past the append");
    assert_eq!(h.fork("s", "tail", None, 1), beyond, "nothing past the tail");
    assert_eq!(h.fork("s", "far", Some(12), 0), Err(Rejection::InvalidFork(ForkFault::OffsetBeyondTail)));
    assert!(h.fork("s", "zero", Some(0), 0).expect("at zero").created);
    assert_eq!(h.read_stitched("zero"), "");
}

#[test]
fn a_json_sub_offset_counts_messages_of_the_batch() {
    let mut h = Harness::new();
    h.create_with("j", "application/json", "[1,2,3,4]", Lifetime::Forever, false).expect("source");
    h.fork("j", "two", Some(0), 2).expect("two messages");
    assert_eq!(h.read_stitched("two"), "1\n2\n");
    h.fork("j", "all", Some(0), 4).expect("all four");
    assert!(matches!(h.fork("j", "five", Some(0), 5), Err(Rejection::InvalidFork(_))));
}

#[test]
fn a_fork_needs_a_live_source_of_its_content_type_in_its_bucket() {
    let mut h = Harness::new();
    assert_eq!(h.fork("missing", "f", None, 0), Err(Rejection::ForkSourceNotFound));
    h.create("s", "text/plain").expect("source");
    let mismatch = ReferenceSource {
        source: key("s"),
        fork: key("f"),
        offset: None,
        sub_offset: 0,
        content_type: Some(ct("application/json")),
    };
    assert_eq!(
        h.apply(Command::ReferenceSource(mismatch)),
        Outcome::ReferenceSource(Err(Rejection::ContentTypeMismatch))
    );
    let elsewhere = ReferenceSource {
        source: key("s"),
        fork: StreamKey::parse("other", "f").expect("key"),
        offset: None,
        sub_offset: 0,
        content_type: None,
    };
    assert!(matches!(
        h.apply(Command::ReferenceSource(elsewhere)),
        Outcome::ReferenceSource(Err(Rejection::InvalidFork(_)))
    ));
    // A refused fork left no reference: the delete is a hard one.
    assert_eq!(h.delete("s"), Ok(None));
    assert!(h.store.stored(&key("s")).is_none());
}

#[test]
fn a_repeated_fork_create_answers_200_and_keeps_one_reference() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "abc", Lifetime::Forever, false).expect("source");
    assert!(h.fork("s", "f", Some(1), 0).expect("fork").created);
    assert!(!h.fork("s", "f", Some(1), 0).expect("repeat").created);
    assert!(!h.fork("s", "f", None, 0).expect("a repeat without an offset").created);
    assert_eq!(h.fork("s", "f", Some(2), 0), Err(Rejection::StreamExistsConflict));
    assert_eq!(h.create("f", "text/plain"), Err(Rejection::StreamExistsConflict), "a plain create on a fork");
    h.create("plain", "text/plain").expect("plain");
    assert_eq!(h.fork("s", "plain", None, 0), Err(Rejection::StreamExistsConflict), "a fork on a plain stream");
    let forks = h.store.stored(&key("s")).and_then(|s| s.fork.as_ref()).map(|f| f.forks.len());
    assert_eq!(forks, Some(1), "the repeats and refusals released their references");
}

#[test]
fn a_source_deleted_under_its_forks_is_soft_deleted_until_the_last_goes() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "kept", Lifetime::Forever, false).expect("source");
    h.fork("s", "f1", None, 0).expect("fork");
    h.fork("s", "f2", None, 0).expect("fork");
    assert_eq!(h.delete("s"), Ok(None), "204, soft");
    assert_eq!(h.store.head(&key("s"), h.now_ms), Err(Rejection::StreamSoftDeleted));
    assert_eq!(h.append(Harness::append_cmd("s", Some("text/plain"), "x")), Err(Rejection::StreamSoftDeleted));
    assert_eq!(h.delete("s"), Err(Rejection::StreamSoftDeleted));
    assert_eq!(h.create("s", "text/plain"), Err(Rejection::StreamExistsConflict), "its path is blocked");
    assert_eq!(h.fork("s", "f3", None, 0), Err(Rejection::ForkSourceDeleted));
    assert_eq!(h.read_stitched("f1"), "kept", "forks still read it");
    let base = h.delete("f1").expect("fork deleted").expect("a fork hands back its base");
    assert_eq!(h.release("s", base.reference), None);
    assert!(h.store.stored(&key("s")).is_some(), "one fork left");
    let base = h.delete("f2").expect("deleted").expect("base");
    assert_eq!(h.release("s", base.reference), None, "the source was no fork: nothing to cascade");
    assert!(h.store.stored(&key("s")).is_none(), "collected with its last fork");
    assert!(h.create("s", "text/plain").expect("the path is free").created);
}

#[test]
fn collecting_a_soft_deleted_fork_cascades_to_its_own_source() {
    let mut h = Harness::new();
    h.create_with("l0", "text/plain", "A", Lifetime::Forever, false).expect("root");
    h.fork("l0", "l1", None, 0).expect("l1");
    h.append(Harness::append_cmd("l1", Some("text/plain"), "B")).expect("append");
    h.fork("l1", "l2", None, 0).expect("l2");
    assert_eq!(h.delete("l0"), Ok(None));
    assert_eq!(h.delete("l1"), Ok(None));
    assert_eq!(h.read_stitched("l2"), "AB");
    let base = h.delete("l2").expect("deleted").expect("base");
    let next = h.release("l1", base.reference).expect("l1 collected, its base released next");
    assert_eq!(next.source, key("l0"));
    assert_eq!(h.release("l0", next.reference), None);
    assert!(h.store.is_empty());
}

#[test]
fn an_expired_source_stays_for_its_forks_and_a_sweep_releases_expired_forks() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "data", Lifetime::Ttl { secs: 2 }, false).expect("source");
    let fork = h.fork("s", "f", None, 0).expect("fork");
    assert!(fork.created);
    assert_eq!(
        h.store.head(&key("f"), h.now_ms).map(|i| i.lifetime),
        Ok(Lifetime::Ttl { secs: 2 }),
        "the source's TTL, as a window of the fork's own"
    );
    h.now_ms += 1_500;
    assert_eq!(h.read_stitched("f"), "data", "reading the fork does not renew the source");
    h.append(Harness::append_cmd("f", Some("text/plain"), "!")).expect("a write renews the fork alone");
    h.now_ms += 600;
    assert_eq!(h.store.head(&key("s"), h.now_ms), Err(Rejection::StreamNotFound), "the source expired");
    assert_eq!(h.apply(Command::Sweep), Outcome::Sweep { removed: 0, released: vec![] }, "kept for its fork");
    assert_eq!(h.create("s", "text/plain"), Err(Rejection::StreamExistsConflict));
    assert_eq!(h.read_stitched("f"), "data!");
    h.now_ms += 10_000;
    let Outcome::Sweep { removed, released } = h.apply(Command::Sweep) else { panic!("a sweep") };
    assert_eq!((removed, released.len()), (1, 1), "the fork expired and hands back its base");
    assert_eq!(h.release("s", released[0].reference), None);
    assert!(h.store.is_empty(), "the expired source went with its last fork");
}

#[test]
fn a_fork_of_an_absolute_expiry_inherits_it_and_its_own_lifetime_wins() {
    let referenced = crate::fork::SourceReferenced {
        base: ForkBase {
            source: key("s"),
            incarnation: Incarnation::derive(1, &key("s"), 1, 1),
            offset: Offset(0),
            reference: 1,
        },
        content_type: ct("text/plain"),
        lifetime: Lifetime::ExpiresAt { at_ms: 5_000 },
        deadline_ms: Some(5_000),
    };
    assert_eq!(referenced.inherited_lifetime(None), Lifetime::ExpiresAt { at_ms: 5_000 });
    assert_eq!(referenced.inherited_lifetime(Some(Lifetime::Ttl { secs: 9 })), Lifetime::Ttl { secs: 9 });
}

#[test]
fn a_forks_bootstrap_leaves_the_source_part_to_the_shell_and_bytes_are_all_or_nothing() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "abcdef", Lifetime::Forever, false).expect("source");
    h.fork("s", "f", None, 0).expect("fork");
    h.append(Harness::append_cmd("f", Some("text/plain"), "XY")).expect("append");
    let view = h.store.bootstrap(&key("f"), 100, h.now_ms).expect("bootstrap");
    assert_eq!(view.next, Offset(8));
    let own: Vec<u8> = view.updates.iter().flat_map(|c| c.to_vec()).collect();
    assert_eq!(own, b"XY", "the fork's own updates; the source part is the shell's");
    let (prefix, query) = view.prefix.expect("a source part");
    assert_eq!((prefix.from, prefix.to), (Offset(0), Offset(6)));
    assert_eq!(h.read_prefix(&prefix), "abcdef");
    assert_eq!(query.max_bytes, 100);
    // Eight bytes do not fit in seven: none, as for any stream of bytes.
    let view = h.store.bootstrap(&key("f"), 7, h.now_ms).expect("bootstrap");
    assert!(view.updates.is_empty() && view.next == Offset(6), "the own part is empty");
    let (prefix, query) = view.prefix.expect("a source part");
    let part = h.store.read_fork_prefix(&prefix, query).expect("source");
    assert_eq!(part.next, Offset(0), "and the source part takes nothing");
}

/// A backup's group object (MessagePack, structs as arrays) carries the
/// fork links: a fork's base, its source's references, a soft delete.
#[test]
fn a_backup_of_a_group_with_forks_round_trips() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "kept", Lifetime::Forever, false).expect("source");
    h.fork("s", "f", None, 0).expect("fork");
    assert_eq!(h.delete("s"), Ok(None), "soft");
    let backup = crate::backup::GroupBackup {
        format_version: crate::backup::BACKUP_FORMAT,
        group: 0,
        group_count: 1,
        commit_index: 9,
        store: h.store.clone(),
    };
    let restored = crate::backup::GroupBackup::decode(&backup.encode().expect("encodes")).expect("decodes");
    assert_eq!(restored.store, h.store);
    h.store = restored.store;
    assert_eq!(h.read_stitched("f"), "kept");
    assert_eq!(h.store.head(&key("s"), h.now_ms), Err(Rejection::StreamSoftDeleted));
}

/// A source kept for its forks still moves its hot bytes to the cold tier:
/// the flusher picks it, and the commit freezes them (else the flusher
/// would upload them again on every pass, and they would stay in memory).
#[test]
fn a_soft_deleted_source_is_flushed_and_its_flush_commits() {
    let mut h = Harness::new();
    h.create_with("s", "text/plain", "kept", Lifetime::Forever, false).expect("source");
    h.fork("s", "f", None, 0).expect("fork");
    assert_eq!(h.delete("s"), Ok(None), "soft");
    let picked: Vec<StreamKey> = h.store.hot_streams(h.now_ms, |_| true).map(|(k, _)| k).collect();
    assert!(picked.contains(&key("s")), "{picked:?}");
    let incarnation = h.store.stored(&key("s")).expect("kept").incarnation;
    let piece = crate::cold::ColdPiece {
        key: key("s"),
        incarnation,
        start: Offset(0),
        len: 4,
        object_offset: 0,
        digest: [0; 32],
    };
    let commit = crate::cold::CommitCold { object: "seg-1".into(), pieces: vec![piece] };
    assert_eq!(h.apply(Command::CommitCold(commit)), Outcome::CommitCold { frozen: 1 });
    assert_eq!(h.store.stored(&key("s")).map(|s| s.data.hot_bytes()), Some(0));
}
