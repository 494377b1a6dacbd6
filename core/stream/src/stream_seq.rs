//! `Stream-Seq`: a writer-chosen compare-and-set token (spec/18-conditional-writes.md).

/// Longest accepted `Stream-Seq` value.
pub const MAX_STREAM_SEQ_BYTES: usize = 256;

/// A `Stream-Seq` value, compared bytewise.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamSeq(String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stream-seq must be at most 256 bytes")]
pub struct StreamSeqTooLong;

impl StreamSeq {
    /// Reads a header value. A value with a byte outside printable ASCII is
    /// ignored (`Ok(None)`), as the spec says; a longer one is refused.
    pub fn parse(raw: &[u8]) -> Result<Option<StreamSeq>, StreamSeqTooLong> {
        if raw.len() > MAX_STREAM_SEQ_BYTES {
            return Err(StreamSeqTooLong);
        }
        if raw.is_empty() || !raw.iter().all(|b| (0x20..0x7f).contains(b)) {
            return Ok(None);
        }
        Ok(std::str::from_utf8(raw).ok().map(|s| StreamSeq(s.to_string())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_ascii_only_and_capped() {
        assert_eq!(StreamSeq::parse(b"0001").map(|s| s.map(|s| s.0)), Ok(Some("0001".into())));
        assert_eq!(StreamSeq::parse(b"a\x01"), Ok(None));
        assert_eq!(StreamSeq::parse("é".as_bytes()), Ok(None));
        assert_eq!(StreamSeq::parse(&[b'a'; 256]).map(|s| s.is_some()), Ok(true));
        assert_eq!(StreamSeq::parse(&[b'a'; 257]), Err(StreamSeqTooLong));
    }

    #[test]
    fn compares_bytewise() {
        let ten = StreamSeq("10".into());
        let nine = StreamSeq("9".into());
        assert!(ten < nine);
    }
}
