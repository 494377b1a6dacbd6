//! `Stream-Incarnation` tokens (extensions §2.4): an opaque value that
//! changes whenever a stream is recreated at the same URL.

use std::fmt;

use crate::ids::StreamKey;

/// Tokens lie in [2^52, 2^53), so they are exact as a JavaScript `Number`.
const LOW: u64 = 1 << 52;

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Incarnation(u64);

impl Incarnation {
    /// Derives the token of a stream created at `log_index` and `now_ms` in
    /// a store whose history is `history_id`. Deterministic, so every
    /// replica derives the same token; `history_id` (drawn at random when a
    /// store's history begins) keeps a fresh store from reissuing tokens of
    /// an earlier one.
    pub fn derive(history_id: u64, key: &StreamKey, log_index: u64, now_ms: u64) -> Incarnation {
        let mut h = mix(history_id ^ mix(log_index) ^ mix(now_ms.rotate_left(17)));
        for b in key.bucket.as_str().bytes().chain([0]).chain(key.stream.as_str().bytes()) {
            h = mix(h ^ u64::from(b));
        }
        Incarnation(LOW + h % LOW)
    }

    /// Parses a header or path value: a canonical decimal in range.
    pub fn parse(raw: &str) -> Option<Incarnation> {
        if raw.is_empty() || raw.len() > 16 || !raw.bytes().all(|b| b.is_ascii_digit()) || raw.starts_with('0') {
            return None;
        }
        Incarnation::from_value(raw.parse().ok()?)
    }

    /// An incarnation carried as a number (the private gRPC plane).
    pub fn from_value(n: u64) -> Option<Incarnation> {
        (LOW..2 * LOW).contains(&n).then_some(Incarnation(n))
    }

    pub fn value(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Incarnation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// splitmix64's finalizer: a cheap, well-spread 64-bit mix.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_in_range_round_trip_and_differ_per_create() {
        let key = StreamKey::parse("demo", "s").expect("valid");
        let a = Incarnation::derive(7, &key, 1, 1000);
        let b = Incarnation::derive(7, &key, 2, 1000);
        assert_ne!(a, b);
        assert_eq!(a, Incarnation::derive(7, &key, 1, 1000), "deterministic");
        assert_ne!(a, Incarnation::derive(8, &key, 1, 1000), "history id matters");
        for t in [a, b] {
            assert!((LOW..2 * LOW).contains(&t.value()));
            assert_eq!(Incarnation::parse(&t.to_string()), Some(t));
        }
    }

    #[test]
    fn malformed_tokens_are_refused() {
        for bad in ["", "abc", "1", "04503599627370496", "9007199254740992", "-4503599627370496", " 4503599627370496"] {
            assert_eq!(Incarnation::parse(bad), None, "{bad:?}");
        }
        assert!(Incarnation::parse("4503599627370496").is_some());
        assert!(Incarnation::parse("9007199254740991").is_some());
    }
}
