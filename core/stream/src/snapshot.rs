//! Application snapshots (extensions §2): a blob that folds a stream's
//! history up to an offset, with a digest that keys its publish.

use std::fmt;

use bytes::Bytes;

use crate::content_type::ContentType;
use crate::offset::Offset;

/// The BLAKE3 hash of the content type's length (u64 little-endian), the
/// content type and the body, shown as 64 lowercase hex digits.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SnapshotDigest([u8; 32]);

impl SnapshotDigest {
    pub fn of(content_type: &ContentType, body: &[u8]) -> SnapshotDigest {
        let ct = content_type.as_str().as_bytes();
        let mut hasher = blake3::Hasher::new();
        hasher.update(&(ct.len() as u64).to_le_bytes());
        hasher.update(ct);
        hasher.update(body);
        SnapshotDigest(*hasher.finalize().as_bytes())
    }
}

impl SnapshotDigest {
    /// The digest from its 64 lowercase hex digits (`Stream-Snapshot-Digest`).
    pub fn parse_hex(text: &str) -> Option<SnapshotDigest> {
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(SnapshotDigest(out))
    }
}

impl fmt::Display for SnapshotDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The latest visible snapshot of a stream.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub offset: Offset,
    pub content_type: ContentType,
    /// Empty while the body lives in the cold tier (`cold`); the shell
    /// fetches it (and checks `digest`) before anyone reads it.
    pub body: Bytes,
    pub digest: SnapshotDigest,
    pub cold: Option<ColdBody>,
}

/// A snapshot body stored as one cold object (bodies of at least
/// `runtime.external_payload_min_size`, and snapshots assembled from parts).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct ColdBody {
    pub object: String,
    pub len: u64,
}

/// What a reader learns of a snapshot without its body.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotMeta {
    pub offset: Offset,
    pub digest: SnapshotDigest,
}

impl Snapshot {
    pub fn meta(&self) -> SnapshotMeta {
        SnapshotMeta { offset: self.offset, digest: self.digest }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_covers_content_type_and_body() {
        let json = ContentType::parse("application/json").expect("valid");
        let text = ContentType::parse("text/plain").expect("valid");
        let a = SnapshotDigest::of(&json, b"{}");
        assert_eq!(a, SnapshotDigest::of(&json, b"{}"));
        assert_ne!(a, SnapshotDigest::of(&text, b"{}"));
        assert_ne!(a, SnapshotDigest::of(&json, b"[]"));
        assert_eq!(a.to_string().len(), 64);
        let mut hasher = blake3::Hasher::new();
        hasher.update(&16u64.to_le_bytes());
        hasher.update(b"application/json{}");
        assert_eq!(a.to_string(), hasher.finalize().to_hex().to_string());
        assert_eq!(SnapshotDigest::parse_hex(&a.to_string()), Some(a));
        assert_eq!(SnapshotDigest::parse_hex(&a.to_string().to_uppercase()), None);
        assert_eq!(SnapshotDigest::parse_hex("abc"), None);
    }
}
