//! Where a read may stop, whatever holds the bytes (hot chunks or the cold
//! tier).

/// Where a read may stop.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// Anywhere.
    Byte,
    /// Never inside a UTF-8 sequence (text SSE, base protocol §5.8).
    Utf8,
    /// Only after an LF that ends a JSON message; a message larger than the
    /// limit is returned whole.
    Message,
}
