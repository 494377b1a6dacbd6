//! `ExpireStreams` (spec/35 "Deleted data"): bounded, earliest expiry
//! first, a second after expiry, and never a stream forks still read.

use super::expiry::EXPIRY_GRACE_MS;
use super::tests::{Harness, key};
use super::*;
use crate::command::ExpireStreams;
use crate::lifetime::Lifetime;

fn expiring(h: &mut Harness, name: &str, in_ms: u64) {
    let at_ms = h.now_ms + in_ms;
    h.create_with(name, "text/plain", "", Lifetime::ExpiresAt { at_ms }, false).expect("created");
}

fn expire(h: &mut Harness, max: u32) -> Outcome {
    h.apply(Command::ExpireStreams(ExpireStreams { max }))
}

#[test]
fn a_stream_leaves_a_second_after_its_expiry_and_not_before() {
    let mut h = Harness::new();
    expiring(&mut h, "e", 5_000);
    h.create("kept", "text/plain").expect("created");
    h.now_ms += 5_000;
    assert_eq!(h.store.expired_count(h.now_ms), 0, "expired, but not a second ago");
    assert_eq!(expire(&mut h, 256), Outcome::Sweep { removed: 0, released: vec![] });
    h.now_ms += EXPIRY_GRACE_MS;
    assert_eq!(h.store.expired_count(h.now_ms), 1);
    assert_eq!(expire(&mut h, 256), Outcome::Sweep { removed: 1, released: vec![] });
    assert_eq!(h.store.len(), 1, "the stream without expiry stays");
    assert!(h.store.head(&key("kept"), h.now_ms).is_ok());
}

#[test]
fn an_entry_removes_at_most_its_max_earliest_expiry_first() {
    let mut h = Harness::new();
    // Created in another order than they expire.
    for (name, in_ms) in [("c", 3_000), ("a", 1_000), ("d", 4_000), ("b", 2_000)] {
        expiring(&mut h, name, in_ms);
    }
    h.now_ms += 10_000;
    assert_eq!(h.store.expired_count(h.now_ms), 4);
    assert_eq!(expire(&mut h, 2), Outcome::Sweep { removed: 2, released: vec![] });
    assert_eq!(h.store.len(), 2);
    assert!(
        h.store.live(&key("c"), h.now_ms - 10_000).is_some() && h.store.live(&key("d"), h.now_ms - 10_000).is_some()
    );
    assert!(h.store.live(&key("a"), h.now_ms - 10_000).is_none(), "the earliest went first");
    assert_eq!(expire(&mut h, 256), Outcome::Sweep { removed: 2, released: vec![] });
    assert_eq!(h.store.expired_count(h.now_ms), 0);
}
