//! Protocol headers: their names, defined once, and typed parsing of each
//! request header the routes read.

use http::{HeaderMap, HeaderName};
use ursula_stream::lifetime::Lifetime;
use ursula_stream::producer::{MAX_PRODUCER_ID_BYTES, MAX_PRODUCER_NUMBER};
use ursula_stream::{ContentType, Incarnation, ProducerHeaders, StreamSeq};

use crate::error::ApiError;

pub use crate::names;

/// Request headers that carry one value. Two of them make a request
/// ambiguous (a proxy that takes the last would disagree with us on a write
/// key), so a repeat is refused before anything else is read.
const SINGLE_VALUED: [HeaderName; 13] = [
    http::header::CONTENT_TYPE,
    http::header::RANGE,
    names::PRODUCER_ID,
    names::PRODUCER_EPOCH,
    names::PRODUCER_SEQ,
    names::PRODUCER_DIGEST,
    names::STREAM_SEQ,
    names::STREAM_TTL,
    names::STREAM_EXPIRES_AT,
    names::STREAM_CLOSED,
    names::STREAM_INCARNATION,
    names::STREAM_SNAPSHOT_PARTS,
    names::STREAM_SNAPSHOT_DIGEST,
];

/// A request body is stored as sent: one with a `Content-Encoding` (gzip,
/// ...) would be stored compressed, so it is refused (`415`).
pub fn refuse_encoded_body(h: &HeaderMap) -> Result<(), ApiError> {
    let encoded = h
        .get_all(http::header::CONTENT_ENCODING)
        .iter()
        .any(|v| v.to_str().map_or(true, |e| !e.trim().eq_ignore_ascii_case("identity")));
    if encoded { Err(ApiError::EncodedBody) } else { Ok(()) }
}

/// `400 INVALID_HEADER` naming the first protocol header sent twice.
pub fn refuse_duplicates(h: &HeaderMap) -> Result<(), ApiError> {
    // As many values as names: no header at all is repeated (the common case).
    if h.len() == h.keys_len() {
        return Ok(());
    }
    match SINGLE_VALUED.iter().find(|name| h.get_all(*name).iter().nth(1).is_some()) {
        Some(name) => Err(ApiError::InvalidHeader(format!("{name} appears more than once"))),
        None => Ok(()),
    }
}

/// The value of a header as text; a value that is not visible ASCII is malformed.
fn text(headers: &HeaderMap, name: HeaderName) -> Result<Option<&str>, ApiError> {
    match headers.get(&name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim()))
            .map_err(|_| ApiError::InvalidHeader(format!("{name} is not visible ASCII"))),
    }
}

/// `Stream-Closed` counts only when it is `true`, case-insensitively;
/// any other value is ignored (base protocol §4.1).
pub fn stream_closed(headers: &HeaderMap) -> bool {
    headers
        .get(names::STREAM_CLOSED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// `Content-Type` of a request; a value that is no MIME type is malformed.
/// The body length a request declares, when it declares a valid one.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(http::header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// The longest `Content-Type` a stream takes.
pub const MAX_CONTENT_TYPE_BYTES: usize = 256;

pub fn content_type(headers: &HeaderMap) -> Result<Option<ContentType>, ApiError> {
    match headers.get(http::header::CONTENT_TYPE) {
        None => Ok(None),
        Some(v) => {
            let raw = v.to_str().map_err(|_| ApiError::InvalidHeader("content-type is not visible ASCII".into()))?;
            if raw.trim().is_empty() {
                return Ok(None);
            }
            // The stream keeps it and echoes it on every answer.
            if raw.len() > MAX_CONTENT_TYPE_BYTES {
                return Err(ApiError::InvalidHeader(format!(
                    "content-type is longer than {MAX_CONTENT_TYPE_BYTES} bytes"
                )));
            }
            ContentType::parse(raw)
                .map(Some)
                .ok_or_else(|| ApiError::InvalidHeader("content-type is not a MIME type".into()))
        }
    }
}

/// A canonical non-negative decimal integer: no sign, no leading zero, no fraction.
fn canonical_u64(s: &str) -> Option<u64> {
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if canonical { s.parse().ok() } else { None }
}

/// A create's fork request (`Stream-Forked-From`, `Stream-Fork-Offset`,
/// `Stream-Fork-Sub-Offset`; upstream "Stream forking").
pub struct ForkHeaders {
    pub source: ursula_stream::StreamKey,
    pub offset: Option<ursula_stream::Offset>,
    pub sub_offset: u64,
}

/// The fork request of a create, if any: a fork offset or sub-offset
/// without a source is malformed, as is a sub-offset outside `0|[1-9][0-9]*`.
pub fn fork(headers: &HeaderMap) -> Result<Option<ForkHeaders>, ApiError> {
    let from = text(headers, names::STREAM_FORKED_FROM)?.filter(|v| !v.is_empty());
    let offset = text(headers, names::STREAM_FORK_OFFSET)?;
    let sub_offset = text(headers, names::STREAM_FORK_SUB_OFFSET)?;
    let Some(from) = from else {
        if offset.is_some() || sub_offset.is_some() {
            return Err(ApiError::InvalidHeader(
                "stream-fork-offset and stream-fork-sub-offset need stream-forked-from".into(),
            ));
        }
        return Ok(None);
    };
    let path = from.split('?').next().unwrap_or(from);
    let source = match crate::route::route(path) {
        Ok(crate::route::Route::Stream(key)) => key,
        _ => return Err(ApiError::InvalidHeader("stream-forked-from must be a stream's path".into())),
    };
    let offset = match offset {
        None => None,
        Some(raw) => Some(
            ursula_stream::Offset::parse_token(raw)
                .ok_or_else(|| ApiError::InvalidHeader("stream-fork-offset must be an offset".into()))?,
        ),
    };
    let sub_offset = match sub_offset {
        None => 0,
        Some(raw) => canonical_u64(raw).ok_or_else(|| {
            ApiError::InvalidHeader(
                "stream-fork-sub-offset must be a non-negative integer without leading zeros".into(),
            )
        })?,
    };
    Ok(Some(ForkHeaders { source, offset, sub_offset }))
}

/// Whether the request names a lifetime (`Stream-TTL` or `Stream-Expires-At`).
pub fn names_lifetime(headers: &HeaderMap) -> bool {
    headers.contains_key(names::STREAM_TTL) || headers.contains_key(names::STREAM_EXPIRES_AT)
}

/// `Stream-TTL` and `Stream-Expires-At`, which exclude each other.
pub fn lifetime(headers: &HeaderMap) -> Result<Lifetime, ApiError> {
    let ttl = text(headers, names::STREAM_TTL)?;
    let expires = text(headers, names::STREAM_EXPIRES_AT)?;
    match (ttl, expires) {
        (Some(_), Some(_)) => {
            Err(ApiError::InvalidHeader("stream-ttl and stream-expires-at exclude each other".into()))
        }
        (Some(ttl), None) => canonical_u64(ttl).map(|secs| Lifetime::Ttl { secs }).ok_or_else(|| {
            ApiError::InvalidHeader("stream-ttl must be a non-negative integer without sign or leading zeros".into())
        }),
        (None, Some(at)) => {
            let parsed = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
                .map_err(|_| ApiError::InvalidHeader("stream-expires-at must be an RFC 3339 timestamp".into()))?;
            let at_ms = u64::try_from(parsed.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
            Ok(Lifetime::ExpiresAt { at_ms })
        }
        (None, None) => Ok(Lifetime::Forever),
    }
}

/// `Stream-Seq`: ignored unless printable ASCII, refused above 256 bytes.
pub fn stream_seq(headers: &HeaderMap) -> Result<Option<StreamSeq>, ApiError> {
    match headers.get(names::STREAM_SEQ) {
        None => Ok(None),
        Some(v) => StreamSeq::parse(v.as_bytes()).map_err(|e| ApiError::InvalidHeader(e.to_string())),
    }
}

/// The three producer headers, all or none (base protocol §5.2.1).
pub fn producer(headers: &HeaderMap) -> Result<Option<ProducerHeaders>, ApiError> {
    let id = text(headers, names::PRODUCER_ID)?;
    let epoch = text(headers, names::PRODUCER_EPOCH)?;
    let seq = text(headers, names::PRODUCER_SEQ)?;
    let (id, epoch, seq) = match (id, epoch, seq) {
        (None, None, None) => return Ok(None),
        (Some(id), Some(epoch), Some(seq)) => (id, epoch, seq),
        _ => return Err(ApiError::InvalidProducer("producer-id, producer-epoch and producer-seq go together".into())),
    };
    if id.is_empty() {
        return Err(ApiError::InvalidProducer("producer-id must not be empty".into()));
    }
    if id.len() > MAX_PRODUCER_ID_BYTES {
        return Err(ApiError::InvalidProducer("producer-id must be at most 256 bytes".into()));
    }
    let number = |name: &str, s: &str| {
        canonical_u64(s)
            .filter(|n| *n <= MAX_PRODUCER_NUMBER)
            .ok_or_else(|| ApiError::InvalidProducer(format!("{name} must be an integer from 0 to 2^53-1")))
    };
    Ok(Some(ProducerHeaders {
        id: id.to_string(),
        epoch: number("producer-epoch", epoch)?,
        seq: number("producer-seq", seq)?,
        digest: None,
    }))
}

/// `Producer-Digest`: the BLAKE3-256 of the body as 64 lowercase hex digits.
pub fn producer_digest(headers: &HeaderMap) -> Result<Option<[u8; 32]>, ApiError> {
    let Some(raw) = text(headers, names::PRODUCER_DIGEST)? else { return Ok(None) };
    let malformed = || ApiError::InvalidHeader("producer-digest must be 64 lowercase hexadecimal digits".into());
    if raw.len() != 64 || !raw.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(malformed());
    }
    let mut out = [0u8; 32];
    for (i, pair) in raw.as_bytes().chunks(2).enumerate() {
        let hex = std::str::from_utf8(pair).map_err(|_| malformed())?;
        let byte = u8::from_str_radix(hex, 16).map_err(|_| malformed())?;
        if let Some(slot) = out.get_mut(i) {
            *slot = byte;
        }
    }
    Ok(Some(out))
}

/// Whether a request names any `Stream-*` or `Producer-*` header: most
/// appends name none, and skip the lookups of each one.
pub fn any_protocol_header(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| {
        let name = k.as_str();
        name.starts_with("stream-") || name.starts_with("producer-")
    })
}

/// Refuses headers that 0.6.0 removed, so a client relying on them learns
/// at once (spec/43 "JSON record coordinates").
pub fn refuse_removed_append_headers(headers: &HeaderMap) -> Result<(), ApiError> {
    const STREAM_RECORD_MATCH: HeaderName = HeaderName::from_static("stream-record-match");
    if headers.contains_key(STREAM_RECORD_MATCH) {
        return Err(ApiError::InvalidHeader("stream-record-match was removed in 0.6.0; use stream-seq".into()));
    }
    Ok(())
}

/// The `Stream-Incarnation` precondition: one value the server could have issued.
pub fn incarnation(headers: &HeaderMap) -> Result<Option<Incarnation>, ApiError> {
    let mut values = headers.get_all(names::STREAM_INCARNATION).iter();
    let Some(first) = values.next() else { return Ok(None) };
    let malformed = || ApiError::InvalidHeader("stream-incarnation must be one token the server issued".into());
    if values.next().is_some() {
        return Err(malformed());
    }
    let text = first.to_str().map_err(|_| malformed())?.trim();
    Incarnation::parse(text).map(Some).ok_or_else(malformed)
}

/// Whether the client accepts a gzip response.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers.get_all(http::header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',').any(|part| {
            let mut it = part.trim().split(';');
            let coding = it.next().unwrap_or("").trim();
            let refused =
                it.any(|p| matches!(p.trim().replace(' ', "").as_str(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"));
            (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn map(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).expect("test header"));
        }
        h
    }

    #[test]
    fn ttl_must_be_canonical() {
        for ok in ["0", "1", "3600"] {
            assert!(matches!(lifetime(&map(&[("stream-ttl", ok)])), Ok(Lifetime::Ttl { .. })), "{ok}");
        }
        for bad in ["+3600", "03600", "3600.0", "3.6e3", "-1", "", "abc", "1 2"] {
            assert!(lifetime(&map(&[("stream-ttl", bad)])).is_err(), "{bad}");
        }
        assert!(lifetime(&map(&[("stream-ttl", "5"), ("stream-expires-at", "2030-01-01T00:00:00Z")])).is_err());
    }

    #[test]
    fn expires_at_is_rfc3339() {
        assert!(matches!(
            lifetime(&map(&[("stream-expires-at", "2030-01-01T00:00:00.5+02:00")])),
            Ok(Lifetime::ExpiresAt { .. })
        ));
        assert!(lifetime(&map(&[("stream-expires-at", "tomorrow")])).is_err());
    }

    #[test]
    fn producer_headers_go_together_and_are_bounded() {
        assert_eq!(producer(&map(&[])), Ok(None));
        let full = map(&[("producer-id", "p"), ("producer-epoch", "1"), ("producer-seq", "2")]);
        assert_eq!(producer(&full), Ok(Some(ProducerHeaders { id: "p".into(), epoch: 1, seq: 2, digest: None })));
        for bad in [
            map(&[("producer-id", "p")]),
            map(&[("producer-id", ""), ("producer-epoch", "1"), ("producer-seq", "2")]),
            map(&[("producer-id", "p"), ("producer-epoch", "-1"), ("producer-seq", "2")]),
            map(&[("producer-id", "p"), ("producer-epoch", "9007199254740992"), ("producer-seq", "2")]),
            map(&[("producer-id", "p"), ("producer-epoch", "1"), ("producer-seq", "x")]),
        ] {
            assert!(producer(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_a_repeated_single_valued_header_is_refused() {
        assert_eq!(refuse_duplicates(&map(&[("producer-id", "p"), ("stream-seq", "1")])), Ok(()));
        // Repeats of headers that may carry several values pass.
        assert_eq!(refuse_duplicates(&map(&[("accept", "a/b"), ("accept", "c/d")])), Ok(()));
        for name in ["content-type", "producer-seq", "stream-seq", "stream-incarnation"] {
            let refused = refuse_duplicates(&map(&[("accept", "a/b"), (name, "1"), (name, "2")]));
            assert!(matches!(&refused, Err(ApiError::InvalidHeader(m)) if m.starts_with(name)), "{name}: {refused:?}");
        }
    }

    #[test]
    fn stream_closed_is_true_or_absent() {
        assert!(stream_closed(&map(&[("stream-closed", "TRUE")])));
        for other in ["false", "yes", "1", ""] {
            assert!(!stream_closed(&map(&[("stream-closed", other)])), "{other}");
        }
    }

    #[test]
    fn gzip_acceptance() {
        assert!(accepts_gzip(&map(&[("accept-encoding", "gzip, deflate, br")])));
        assert!(!accepts_gzip(&map(&[("accept-encoding", "br")])));
        assert!(!accepts_gzip(&map(&[("accept-encoding", "gzip;q=0")])));
        assert!(!accepts_gzip(&map(&[])));
    }
}
