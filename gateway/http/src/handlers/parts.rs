//! Snapshot upload in parts (spec/30 "Upload in parts", extensions §2.2):
//! staging a part, committing a manifest of parts, discarding the staged
//! parts. The backend stages parts in its cold tier; without one it
//! answers `501 NO_COLD_STORE`.

use bytes::Bytes;
use http::{Request, StatusCode};
use ursula_stream::{ContentType, Offset, SnapshotDigest, StreamKey};

use super::{Shared, read_body};
use crate::backend::{Backend, PartAdmission, PartStaged, PartsCommit, PartsDiscard, SnapshotParts, StagedPart};
use crate::error::ApiError;
use crate::headers::{self, names};
use crate::render::{self, Answer};

/// A commit names at most this many parts (`MAX_SNAPSHOT_PARTS`).
pub const MAX_SNAPSHOT_PARTS: usize = 4096;

/// `POST /{bucket}/{stream}/snapshot/{offset}/parts`: `201` with the part's id.
pub async fn stage<B, T>(
    shared: &Shared<B>,
    key: StreamKey,
    raw_offset: &str,
    req: Request<T>,
) -> Result<Answer, ApiError>
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let parts = shared.backend.parts().ok_or(ApiError::NoColdStore)?;
    // The offset is checked and otherwise ignored: a part belongs to the incarnation.
    Offset::parse_token(raw_offset).ok_or(ApiError::InvalidPositionOffset)?;
    let expect = headers::incarnation(req.headers())?;
    let declared = headers::content_length(req.headers()).unwrap_or(crate::limits::MAX_REQUEST_BYTES);
    parts.admit_part(PartAdmission { key: key.clone(), expect, declared }).await?;
    let upload = read_body(shared, req).await?;
    let PartStaged { id, info } = parts.stage_part(StagedPart { key, expect, body: upload.bytes.clone() }).await?;
    let b = render::builder(StatusCode::CREATED)
        .header(names::STREAM_SNAPSHOT_PART, id)
        .header(names::STREAM_INCARNATION, info.incarnation.to_string());
    Ok(render::finish(b, render::empty()))
}

/// The part count of `Stream-Snapshot-Parts`: a canonical decimal in 1..=4096.
fn part_count(raw: &str) -> Result<usize, ApiError> {
    let canonical = !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) && !raw.starts_with('0');
    match raw.parse::<usize>() {
        Ok(n) if canonical && (1..=MAX_SNAPSHOT_PARTS).contains(&n) => Ok(n),
        _ => Err(ApiError::InvalidPartsCommit),
    }
}

/// The manifest: exactly `count` distinct ids, each followed by one LF.
fn manifest(body: &[u8], count: usize) -> Result<Vec<String>, ApiError> {
    let invalid = || ApiError::InvalidPartsCommit;
    let text = std::str::from_utf8(body).map_err(|_| invalid())?;
    let lines = text.strip_suffix('\n').ok_or_else(invalid)?;
    let ids: Vec<String> = lines.split('\n').map(str::to_string).collect();
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    if ids.len() != count || distinct.len() != count || ids.iter().any(|id| id.is_empty() || id.contains('\r')) {
        return Err(invalid());
    }
    Ok(ids)
}

/// `PUT …/snapshot/{offset}` with `Stream-Snapshot-Parts`: publishes the
/// snapshot assembled from the listed parts, with a publish's answers.
pub async fn commit<B, T>(
    shared: &Shared<B>,
    key: StreamKey,
    raw_offset: &str,
    req: Request<T>,
) -> Result<Answer, ApiError>
where
    B: Backend,
    T: http_body::Body<Data = Bytes> + Send + 'static,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let offset = super::snapshot::offset(raw_offset)?;
    let cold = shared.backend.parts().ok_or(ApiError::NoColdStore)?;
    let h = req.headers();
    let count = part_count(h.get(names::STREAM_SNAPSHOT_PARTS).and_then(|v| v.to_str().ok()).unwrap_or_default())?;
    let digest = h
        .get(names::STREAM_SNAPSHOT_DIGEST)
        .and_then(|v| v.to_str().ok())
        .and_then(SnapshotDigest::parse_hex)
        .ok_or_else(|| ApiError::InvalidHeader("Stream-Snapshot-Digest must be 64 lowercase hex digits".into()))?;
    let content_type = headers::content_type(h)?.unwrap_or_else(ContentType::octet_stream);
    let expect = headers::incarnation(h)?;
    let upload = read_body(shared, req).await?;
    let parts = manifest(&upload.bytes, count)?;
    let ok = cold.commit_parts(PartsCommit { key, offset, content_type, digest, expect, parts }).await?;
    Ok(super::snapshot::published(&ok))
}

/// `DELETE /{bucket}/{stream}/snapshot/parts`.
pub async fn discard<B: Backend, T>(shared: &Shared<B>, key: StreamKey, req: &Request<T>) -> Result<Answer, ApiError> {
    let parts = shared.backend.parts().ok_or(ApiError::NoColdStore)?;
    let expect = headers::incarnation(req.headers())?;
    let info = parts.discard_parts(PartsDiscard { key, expect }).await?;
    let b = render::builder(StatusCode::NO_CONTENT).header(names::STREAM_INCARNATION, info.incarnation.to_string());
    Ok(render::finish(b, render::empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_part_count_is_a_canonical_decimal_up_to_4096() {
        assert_eq!(part_count("1").ok(), Some(1));
        assert_eq!(part_count("4096").ok(), Some(4096));
        for bad in ["0", "4097", "01", "+1", "", "1.0", "x"] {
            assert!(part_count(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_manifest_lists_exactly_the_count_of_distinct_ids() {
        assert_eq!(manifest(b"a\nb\n", 2).ok(), Some(vec!["a".to_string(), "b".to_string()]));
        for (bad, n) in [(&b"a\nb"[..], 2), (b"a\na\n", 2), (b"a\n", 2), (b"a\n\nb\n", 3), (b"a\r\n", 1)] {
            assert!(manifest(bad, n).is_err(), "{bad:?}");
        }
    }
}
