//! Which group owns a stream: a stable hash of (bucket, stream), fixed for
//! a given group count, so every node and every restart agrees.

use crate::StreamKey;

/// A group of streams sharing one log and one actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub u32);

/// FNV-1a 64 over `bucket \0 stream`: simple, stable across releases and
/// platforms (unlike `std`'s hasher, whose output may change).
pub fn group_of(key: &StreamKey, group_count: u32) -> GroupId {
    let hash = fnv1a(key.bucket.as_str().bytes().chain(std::iter::once(0)).chain(key.stream.as_str().bytes()));
    GroupId(u32::try_from(hash % u64::from(group_count.max(1))).unwrap_or(0))
}

/// FNV-1a 64: a hash whose output never changes between builds.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.into_iter().fold(OFFSET, |hash, b| (hash ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_is_stable_and_in_range() {
        let key = StreamKey::parse("demo", "hello").expect("valid");
        // Pinned: changing the hash would move every stream of a cluster.
        assert_eq!(group_of(&key, 16), group_of(&key, 16));
        assert_eq!(group_of(&key, 1), GroupId(0));
        let pinned: Vec<u32> =
            ["a", "b", "c", "d"].iter().map(|s| group_of(&StreamKey::parse("demo", s).expect("valid"), 64).0).collect();
        assert_eq!(pinned, pinned_groups());
        for i in 0..1000 {
            let k = StreamKey::parse("demo", &format!("s{i}")).expect("valid");
            assert!(group_of(&k, 7).0 < 7);
        }
    }

    fn pinned_groups() -> Vec<u32> {
        ["a", "b", "c", "d"]
            .iter()
            .map(|s| {
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for b in "demo".bytes().chain(std::iter::once(0)).chain(s.bytes()) {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0000_0100_0000_01b3);
                }
                (h % 64) as u32
            })
            .collect()
    }
}
