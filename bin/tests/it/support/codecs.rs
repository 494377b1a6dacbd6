//! The small codecs the assertions need: offsets, digests, base64, a
//! body pattern.

/// BLAKE3-256 of `abc` and of `hello` (official test vectors), for
/// `Producer-Digest`; `blake3_hex` computes others.
pub const BLAKE3_ABC: &str = "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85";
pub const BLAKE3_HELLO: &str = "ea8f163db38682925e4491c5e58d4bb3506ef8c14eb78a86e908c5624a67200f";

/// Ursula's snapshot digest (extensions §4.4 note): the lowercase hex
/// BLAKE3 hash of the content type's length (u64 little-endian), the
/// content type and the body.
pub fn snapshot_digest(content_type: &str, body: &[u8]) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&(content_type.len() as u64).to_le_bytes());
    hasher.update(content_type.as_bytes());
    hasher.update(body);
    hasher.finalize().to_hex().to_string()
}

/// The BLAKE3-256 of `body` as 64 lowercase hex digits (`Producer-Digest`).
pub fn blake3_hex(body: &[u8]) -> String {
    blake3::hash(body).to_hex().to_string()
}

/// `len` bytes of a fixed pattern that repeats every 251 bytes, so a slice
/// at the wrong place does not compare equal.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// The server's offset token for byte position `n`: 20 zero-padded digits.
pub fn offset(n: u64) -> String {
    format!("{n:020}")
}

/// Standard base64 (RFC 4648, with padding); `None` when invalid.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

#[test]
fn codecs_match_known_vectors() {
    assert_eq!(base64_decode("AQIDBAUGBwgJCg=="), Some((1..=10).collect()));
    assert_eq!(base64_decode("aGk="), Some(b"hi".to_vec()));
    assert_eq!(base64_decode(""), Some(Vec::new()));
    assert_eq!(base64_decode("aGk"), None);
    assert_eq!(offset(42), "00000000000000000042");
    assert_eq!(blake3_hex(b"abc"), BLAKE3_ABC);
    assert_eq!(blake3_hex(b"hello"), BLAKE3_HELLO);
}
