//! Every refusal the HTTP surface sends, and the one place each becomes a
//! status, an error code and typed headers (extensions §11).

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use ursula_stream::{ErrorCode, IdError, Rejection};

use crate::backend::{BackendError, LeaderHint, PartsRefusal, Unavailable, UpstreamFailure};
use crate::names;

/// A refusal decided by the HTTP layer itself or handed up by the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// A malformed header; the message names only the header.
    InvalidHeader(String),
    InvalidQuery(String),
    /// A removed form of a request, with the form that replaced it.
    Unsupported(String),
    /// A removed route (`405 UNSUPPORTED`).
    RemovedRoute(&'static str),
    /// A request the router cannot take, such as a path that is not UTF-8.
    InvalidRequest(&'static str),
    InvalidOffset,
    /// A snapshot or retention route's offset: only a server-issued one
    /// (those routes take neither `-1` nor `now`).
    InvalidPositionOffset,
    /// An immutable resource's token or offset not in the issued form.
    InvalidResource,
    /// A query on an immutable resource.
    QueryNotAccepted,
    /// Snapshot upload in parts needs a cold backend.
    NoColdStore,
    /// A commit of parts whose manifest does not match `Stream-Snapshot-Parts`.
    InvalidPartsCommit,
    /// A `text/*` body that is not UTF-8.
    InvalidUtf8,
    /// A request body with a `Content-Encoding` (bodies are stored as sent).
    EncodedBody,
    /// A byte range that starts at or past the end of a snapshot.
    RangeNotSatisfiable {
        total: u64,
    },
    InvalidProducer(String),
    InvalidId(IdError),
    NotFound,
    MethodNotAllowed,
    RequestTooLarge {
        limit: u64,
    },
    BodyUnreadable,
    /// A gateway's body budget stayed spent for `--body-budget-wait-ms`.
    UploadBudgetExhausted,
    /// A body stalled or arrived below `--body-min-bytes-per-sec`.
    BodyTooSlow,
    /// Another node leads the stream's group: `307` to `location`.
    Redirect {
        location: String,
        hint: LeaderHint,
    },
    /// No leader of the group is known, and the body was not read.
    NoLeader {
        group: u32,
    },
    Backend(BackendError),
    /// An access-controlled gateway hides the resource (spec/08): the
    /// answer for a bucket that does not exist, as an intermediary's own.
    Concealed,
    /// A bearer credential that does not validate (`401`, RFC 6750).
    InvalidCredential,
    /// A bearer credential past its `exp` (`401`, RFC 6750).
    CredentialExpired,
    /// No signing key of the issuer could be had.
    AuthenticationUnavailable,
    /// A tenant's request rate is spent (`429`, whole seconds until a token).
    RateLimited {
        retry_after_secs: u64,
    },
    /// A tenant's concurrent live reads are all taken.
    LiveReadsExhausted,
    /// A tenant's concurrent large uploads are all taken.
    UploadsExhausted,
    /// A tenant's bytes of large uploads in flight would pass its limit.
    UploadBytesExhausted,
    /// A body above the tenant's limit (`413` naming it, before reading).
    QuotaTooLarge {
        limit: u64,
    },
    /// A refusal of a node's admin plane (spec/35 "Admin endpoints").
    Admin {
        status: StatusCode,
        code: ErrorCode,
        message: std::borrow::Cow<'static, str>,
    },
}

impl ApiError {
    /// A refusal an intermediary makes on its own (extensions §11): it
    /// carries no server identity (§10), as no node answered.
    pub fn is_intermediary(&self) -> bool {
        matches!(
            self,
            ApiError::UploadBudgetExhausted
                | ApiError::BodyTooSlow
                | ApiError::Backend(BackendError::Upstream(_))
                | ApiError::Concealed
                | ApiError::InvalidCredential
                | ApiError::CredentialExpired
                | ApiError::AuthenticationUnavailable
                | ApiError::RateLimited { .. }
                | ApiError::LiveReadsExhausted
                | ApiError::UploadsExhausted
                | ApiError::UploadBytesExhausted
                | ApiError::QuotaTooLarge { .. }
        )
    }
}

impl From<BackendError> for ApiError {
    fn from(e: BackendError) -> Self {
        ApiError::Backend(e)
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> Self {
        ApiError::Backend(BackendError::Rejected(r))
    }
}

/// A rendered refusal: status, code, message and the typed headers.
pub struct ErrorAnswer {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    pub headers: HeaderMap,
}

impl ErrorAnswer {
    fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> ErrorAnswer {
        ErrorAnswer { status, code, message: message.into(), headers: HeaderMap::new() }
    }

    fn header(mut self, name: impl http::header::IntoHeaderName, value: impl ToString) -> ErrorAnswer {
        if let Ok(v) = HeaderValue::from_str(&value.to_string()) {
            self.headers.insert(name, v);
        }
        self
    }

    /// `{"error":{"code":"...","message":"..."}}`
    pub fn body(&self) -> Bytes {
        let body = serde_json::json!({"error": {"code": self.code.as_str(), "message": self.message}});
        // A body that ends with a newline reads well in a terminal (`curl`).
        Bytes::from(format!("{body}\n"))
    }
}

impl ApiError {
    pub fn answer(&self) -> ErrorAnswer {
        use StatusCode as S;
        match self {
            ApiError::InvalidHeader(m) => ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::InvalidHeader, m.clone()),
            ApiError::InvalidQuery(m) => ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::InvalidQuery, m.clone()),
            ApiError::InvalidResource => ErrorAnswer::new(
                S::BAD_REQUEST,
                ErrorCode::InvalidResource,
                "the token or offset in the path is not in the form the server issues",
            ),
            ApiError::QueryNotAccepted => {
                ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::QueryNotAccepted, "immutable resources take no query")
            }
            ApiError::NoColdStore => ErrorAnswer::new(
                S::NOT_IMPLEMENTED,
                ErrorCode::NoColdStore,
                "snapshot upload in parts needs a cold backend",
            ),
            ApiError::RangeNotSatisfiable { total } => ErrorAnswer::new(
                S::RANGE_NOT_SATISFIABLE,
                ErrorCode::RangeNotSatisfiable,
                "the range starts at or past the end of the snapshot",
            )
            .header("content-range", format!("bytes */{total}")),
            ApiError::Unsupported(m) => ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::Unsupported, m.clone()),
            ApiError::RemovedRoute(m) => ErrorAnswer::new(S::METHOD_NOT_ALLOWED, ErrorCode::Unsupported, *m),
            ApiError::InvalidRequest(m) => ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::InvalidRequest, *m),
            ApiError::InvalidPositionOffset => ErrorAnswer::new(
                S::BAD_REQUEST,
                ErrorCode::InvalidOffset,
                "the offset in the path must be one the server returned (20 digits)",
            ),
            ApiError::InvalidOffset => ErrorAnswer::new(
                S::BAD_REQUEST,
                ErrorCode::InvalidOffset,
                "offset must be -1, now, or an offset the server returned",
            ),
            ApiError::InvalidProducer(m) => ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::InvalidProducer, m.clone()),
            ApiError::InvalidId(e @ IdError::InvalidBucket) => {
                ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::InvalidBucketId, e.to_string())
            }
            ApiError::InvalidId(e) => ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::InvalidStreamId, e.to_string()),
            ApiError::NotFound => ErrorAnswer::new(S::NOT_FOUND, ErrorCode::NotFound, "no such route"),
            // The very answer of a node for a bucket nothing created.
            ApiError::Concealed => rejection_answer(&Rejection::BucketNotFound),
            ApiError::InvalidCredential => {
                ErrorAnswer::new(S::UNAUTHORIZED, ErrorCode::InvalidCredential, "the bearer credential is not valid")
                    .header("www-authenticate", r#"Bearer error="invalid_token""#)
            }
            ApiError::CredentialExpired => {
                ErrorAnswer::new(S::UNAUTHORIZED, ErrorCode::CredentialExpired, "the bearer credential has expired")
                    .header("www-authenticate", r#"Bearer error="invalid_token""#)
            }
            ApiError::AuthenticationUnavailable => ErrorAnswer::new(
                S::SERVICE_UNAVAILABLE,
                ErrorCode::AuthenticationUnavailable,
                "the credential cannot be checked now; nothing was forwarded",
            )
            .header("retry-after", 5),
            ApiError::RateLimited { retry_after_secs } => ErrorAnswer::new(
                S::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited,
                "the bucket's request rate is spent; nothing was forwarded",
            )
            .header("retry-after", retry_after_secs),
            ApiError::LiveReadsExhausted => ErrorAnswer::new(
                S::TOO_MANY_REQUESTS,
                ErrorCode::LiveReadsExhausted,
                "the bucket's live reads are all open; nothing was forwarded",
            ),
            ApiError::UploadsExhausted => ErrorAnswer::new(
                S::TOO_MANY_REQUESTS,
                ErrorCode::UploadsExhausted,
                "the bucket's large uploads are all in flight; nothing was forwarded",
            )
            .header("retry-after", 1),
            ApiError::UploadBytesExhausted => ErrorAnswer::new(
                S::TOO_MANY_REQUESTS,
                ErrorCode::UploadBytesExhausted,
                "the bucket's upload bytes in flight are at their limit; nothing was forwarded",
            )
            .header("retry-after", 1),
            ApiError::QuotaTooLarge { limit } => {
                ErrorAnswer::new(S::PAYLOAD_TOO_LARGE, ErrorCode::RequestTooLarge, "request body too large")
                    .header(names::URSULA_MAX_REQUEST_BYTES, limit)
            }
            ApiError::MethodNotAllowed => {
                ErrorAnswer::new(S::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed, "method not allowed on this route")
            }
            ApiError::RequestTooLarge { limit } => {
                ErrorAnswer::new(S::PAYLOAD_TOO_LARGE, ErrorCode::RequestTooLarge, "request body too large")
                    .header(names::URSULA_MAX_REQUEST_BYTES, limit)
            }
            ApiError::BodyUnreadable => {
                ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::BodyUnreadable, "the request body could not be read")
            }
            ApiError::UploadBudgetExhausted => ErrorAnswer::new(
                S::SERVICE_UNAVAILABLE,
                ErrorCode::UploadBudgetExhausted,
                "the gateway's request body budget is spent; nothing was forwarded",
            )
            .header("retry-after", 1),
            ApiError::BodyTooSlow => ErrorAnswer::new(
                S::REQUEST_TIMEOUT,
                ErrorCode::BodyTooSlow,
                "the request body arrived too slowly; nothing was forwarded",
            )
            .header("connection", "close"),
            ApiError::Redirect { location, hint } => ErrorAnswer::new(
                S::TEMPORARY_REDIRECT,
                ErrorCode::LeaderRedirect,
                "another node leads this stream's writes",
            )
            .header("location", location)
            .header(names::RAFT_LEADER_ID, hint.leader_id)
            .header(names::RAFT_GROUP, hint.group)
            .header(names::RAFT_TERM, hint.term),
            ApiError::NoLeader { group } => {
                ErrorAnswer::new(S::SERVICE_UNAVAILABLE, ErrorCode::NoLeader, "the stream's group has no leader now")
                    .header(names::RAFT_GROUP, group)
                    .header("retry-after", 1)
            }
            ApiError::Admin { status, code, message } => ErrorAnswer::new(*status, *code, message.clone()),
            ApiError::Backend(BackendError::Rejected(r)) => rejection_answer(r),
            ApiError::Backend(BackendError::Parts(r)) => parts_answer(r),
            ApiError::EncodedBody => ErrorAnswer::new(
                S::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::InvalidRequest,
                "request bodies are stored as sent: send them without Content-Encoding",
            )
            .header("accept-encoding", "identity"),
            ApiError::InvalidUtf8 => {
                ErrorAnswer::new(S::BAD_REQUEST, ErrorCode::InvalidRequest, "a text/* body must be valid UTF-8")
            }
            ApiError::InvalidPartsCommit => ErrorAnswer::new(
                S::BAD_REQUEST,
                ErrorCode::InvalidPartsCommit,
                "the manifest must list exactly Stream-Snapshot-Parts distinct part ids, each followed by LF",
            ),
            ApiError::Backend(BackendError::Unavailable { reason, retry_after_secs }) => {
                let (code, message) = match reason {
                    Unavailable::NoLeader => (ErrorCode::NoLeader, "the stream's group has no leader now"),
                    Unavailable::WalDiskPressure => (
                        ErrorCode::WalDiskPressure,
                        "the WAL filesystem is short of space; writes resume once it is freed",
                    ),
                    Unavailable::ColdBackpressure => (
                        ErrorCode::ColdBackpressure,
                        "the group's hot bytes are above their ceiling until the cold flush catches up",
                    ),
                    Unavailable::IngressBodyBytes => (
                        ErrorCode::IngressBodyBytesLimitReached,
                        "the write bodies in flight on the node leave too little room for this one",
                    ),
                    Unavailable::RaftUncommitted => (
                        ErrorCode::RaftUncommittedBackpressure,
                        "the group's proposed, unapplied bytes would exceed their ceiling",
                    ),
                    Unavailable::LiveReads => {
                        (ErrorCode::LiveReadBackpressure, "the node holds as many live reads as it may")
                    }
                    Unavailable::RaftLogPressure => (
                        ErrorCode::RaftLogPressure,
                        "the node's Raft log awaits snapshots; writes resume once they shrink it",
                    ),
                    Unavailable::ApplyStopped => (
                        ErrorCode::ApplyStopped,
                        "a committed command failed to apply and stopped the stream's group on this node",
                    ),
                    Unavailable::HistoryPending => (
                        ErrorCode::HistoryPending,
                        "the stream's group starts a new history after an accepted loss; it serves once that applied",
                    ),
                };
                ErrorAnswer::new(S::SERVICE_UNAVAILABLE, code, message).header("retry-after", retry_after_secs)
            }
            ApiError::Backend(BackendError::OutcomeUnknown { retry_after_secs }) => ErrorAnswer::new(
                S::SERVICE_UNAVAILABLE,
                ErrorCode::OutcomeUnknown,
                "the leadership changed after the write was proposed; it may have applied: repeat it with its key",
            )
            .header("retry-after", retry_after_secs),
            ApiError::Backend(BackendError::NoColdStore) => ErrorAnswer::new(
                S::NOT_IMPLEMENTED,
                ErrorCode::NoColdStore,
                "snapshot upload in parts needs a cold backend",
            ),
            ApiError::Backend(BackendError::ColdStoreFailed(_)) => {
                ErrorAnswer::new(S::BAD_GATEWAY, ErrorCode::ColdStoreFailed, "the cold store failed the read")
            }
            ApiError::Backend(BackendError::Upstream(UpstreamFailure::NoUpstream)) => ErrorAnswer::new(
                S::SERVICE_UNAVAILABLE,
                ErrorCode::NoUpstream,
                "the gateway has not reached the cluster yet",
            )
            .header("retry-after", 1),
            ApiError::Backend(BackendError::Upstream(UpstreamFailure::Unreachable)) => ErrorAnswer::new(
                S::SERVICE_UNAVAILABLE,
                ErrorCode::UpstreamUnreachable,
                "no voter of the cluster could be reached",
            )
            .header("retry-after", 1),
            ApiError::Backend(BackendError::Upstream(UpstreamFailure::TimedOut)) => ErrorAnswer::new(
                S::GATEWAY_TIMEOUT,
                ErrorCode::UpstreamTimeout,
                "the voter did not answer in time; a write may have applied: repeat it with its key",
            ),
            ApiError::Backend(BackendError::Internal(_)) => {
                ErrorAnswer::new(S::INTERNAL_SERVER_ERROR, ErrorCode::Internal, "internal server error")
            }
        }
    }
}

fn parts_answer(r: &PartsRefusal) -> ErrorAnswer {
    use StatusCode as S;
    let code = r.code();
    match r {
        PartsRefusal::UnknownPart => {
            ErrorAnswer::new(S::BAD_REQUEST, code, "a listed part is not staged for this stream incarnation")
        }
        PartsRefusal::DigestMismatch => {
            ErrorAnswer::new(S::BAD_REQUEST, code, "the assembled snapshot does not match Stream-Snapshot-Digest")
        }
        PartsRefusal::TooLarge { limit } => {
            ErrorAnswer::new(S::PAYLOAD_TOO_LARGE, code, "the assembled snapshot is too large")
                .header(names::URSULA_MAX_SNAPSHOT_BYTES, limit)
        }
        PartsRefusal::StagedLimit { incarnation, bytes, limit } => {
            let (bound, what) = if *bytes {
                (names::URSULA_MAX_STAGED_BYTES, "bytes of staged parts")
            } else {
                (names::URSULA_MAX_STAGED_PARTS, "staged parts")
            };
            let message = format!("the stream holds as many unused {what} as it may: commit or discard them");
            ErrorAnswer::new(S::TOO_MANY_REQUESTS, code, &message)
                .header(bound, limit)
                .header(names::STREAM_INCARNATION, incarnation)
        }
        PartsRefusal::CommitsBusy => {
            ErrorAnswer::new(S::SERVICE_UNAVAILABLE, code, "every snapshot commit slot is taken; nothing was published")
                .header("retry-after", 1)
        }
        PartsRefusal::CommitInProgress => ErrorAnswer::new(
            S::SERVICE_UNAVAILABLE,
            code,
            "a commit of this stream runs now; repeat the request once it ends",
        )
        .header("retry-after", 1),
    }
}

fn rejection_answer(r: &Rejection) -> ErrorAnswer {
    use StatusCode as S;
    let code = r.code();
    match r {
        Rejection::StreamNotFound => ErrorAnswer::new(S::NOT_FOUND, code, "the stream does not exist"),
        Rejection::BucketNotFound => ErrorAnswer::new(S::NOT_FOUND, code, "the bucket does not exist"),
        Rejection::BucketErased => ErrorAnswer::new(S::NOT_FOUND, code, "the bucket was purged"),
        Rejection::StreamExistsConflict => {
            ErrorAnswer::new(S::CONFLICT, code, "the stream exists with another configuration")
        }
        Rejection::StreamClosed { tail } => ErrorAnswer::new(S::CONFLICT, code, "the stream is closed")
            .header(names::STREAM_CLOSED, "true")
            .header(names::STREAM_NEXT_OFFSET, tail),
        Rejection::ContentTypeMismatch => ErrorAnswer::new(S::CONFLICT, code, "content-type does not match the stream"),
        Rejection::MissingContentType => ErrorAnswer::new(S::BAD_REQUEST, code, "content-type is required with a body"),
        Rejection::EmptyAppend => {
            ErrorAnswer::new(S::BAD_REQUEST, code, "an append needs a body unless it closes the stream")
        }
        Rejection::EmptyJsonArray => ErrorAnswer::new(S::BAD_REQUEST, code, "an empty JSON array appends nothing"),
        Rejection::InvalidJson(e) => ErrorAnswer::new(S::BAD_REQUEST, code, format!("invalid JSON body: {e}")),
        Rejection::StreamSeqConflict { last, tail } => {
            ErrorAnswer::new(S::CONFLICT, code, "stream-seq is not greater than the last accepted one")
                .header(names::STREAM_LAST_SEQ, last.as_str())
                .header(names::STREAM_NEXT_OFFSET, tail)
        }
        Rejection::ProducerStaleEpoch { current, closed_by_claim } => {
            let answer = ErrorAnswer::new(S::FORBIDDEN, code, "producer epoch is older than the current one")
                .header(names::PRODUCER_EPOCH, current);
            match closed_by_claim {
                Some(closed) => answer
                    .header(names::PRODUCER_OUTCOME, "epoch-closed;by=claim")
                    .header(names::PRODUCER_CLOSED_EPOCH, closed.epoch)
                    .header(names::PRODUCER_CLOSED_SEQ, closed.seq),
                None => answer.header(names::PRODUCER_OUTCOME, "stale-epoch"),
            }
        }
        Rejection::ProducerClosedByHistory { closed } => {
            ErrorAnswer::new(S::FORBIDDEN, code, "the stream's history was rewritten since this epoch was claimed")
                .header(names::PRODUCER_EPOCH, closed.epoch)
                .header(names::PRODUCER_OUTCOME, "epoch-closed;by=history")
                .header(names::PRODUCER_CLOSED_EPOCH, closed.epoch)
                .header(names::PRODUCER_CLOSED_SEQ, closed.seq)
        }
        Rejection::ImportConflict => ErrorAnswer::new(S::CONFLICT, code, "the group already holds data"),
        Rejection::ProducerEpochNotClaimed => {
            ErrorAnswer::new(S::BAD_REQUEST, code, "a new producer epoch must start at producer-seq 0")
                .header(names::PRODUCER_EXPECTED_SEQ, 0)
        }
        Rejection::ProducerSeqGap { expected, received } => {
            ErrorAnswer::new(S::CONFLICT, code, "producer-seq is out of order")
                .header(names::PRODUCER_EXPECTED_SEQ, expected)
                .header(names::PRODUCER_RECEIVED_SEQ, received)
        }
        Rejection::ProducerKeyConflict { current } => {
            ErrorAnswer::new(S::FORBIDDEN, code, "the producer key holds a write with another identity")
                .header(names::PRODUCER_EPOCH, current)
                .header(names::PRODUCER_OUTCOME, "key-conflict")
        }
        Rejection::ProducerDigestMismatch => {
            ErrorAnswer::new(S::BAD_REQUEST, code, "producer-digest does not match the body")
        }
        Rejection::OffsetBeyondTail { tail, incarnation } => {
            ErrorAnswer::new(S::RANGE_NOT_SATISFIABLE, code, "offset is beyond the stream's tail")
                .header(names::STREAM_NEXT_OFFSET, tail)
                .header(names::STREAM_INCARNATION, incarnation)
        }
        Rejection::ProducerExpired { floor } => {
            ErrorAnswer::new(S::FORBIDDEN, code, "the write could reach a producer epoch the stream forgot")
                .header(names::PRODUCER_EPOCH, floor)
                .header(names::PRODUCER_OUTCOME, "producer-expired")
        }
        Rejection::ProducerLimit => {
            ErrorAnswer::new(S::TOO_MANY_REQUESTS, code, "the stream holds as many producers as it may")
        }
        Rejection::IncarnationMismatch { current } => {
            let answer =
                ErrorAnswer::new(S::PRECONDITION_FAILED, code, "stream-incarnation does not name the current stream");
            match current {
                Some(c) => answer.header(names::STREAM_INCARNATION, c),
                None => answer,
            }
        }
        Rejection::StreamSoftDeleted => ErrorAnswer::new(
            S::GONE,
            code,
            "the stream was deleted; its forks still read its history, and its path is free once they are gone",
        ),
        Rejection::ForkSourceNotFound => {
            ErrorAnswer::new(S::NOT_FOUND, code, "the fork's source stream does not exist")
        }
        Rejection::ForkSourceDeleted => ErrorAnswer::new(S::CONFLICT, code, "the fork's source stream was deleted"),
        Rejection::InvalidFork(why) => ErrorAnswer::new(S::BAD_REQUEST, code, why.message()),
        Rejection::StreamGone { retained, incarnation } => {
            ErrorAnswer::new(S::GONE, code, "the offset is below the stream's retained history")
                .header(names::STREAM_NEXT_OFFSET, retained)
                .header(names::STREAM_INCARNATION, incarnation)
        }
        Rejection::SnapshotNotFound { incarnation } => {
            ErrorAnswer::new(S::NOT_FOUND, code, "no snapshot at this offset is the latest")
                .header(names::STREAM_INCARNATION, incarnation)
        }
        Rejection::SnapshotConflict { latest } => ErrorAnswer::new(S::CONFLICT, code, "another snapshot is the latest")
            .header(names::STREAM_SNAPSHOT_OFFSET, latest.offset)
            .header(names::STREAM_SNAPSHOT_DIGEST, latest.digest),
        Rejection::SnapshotBeyondTail => {
            ErrorAnswer::new(S::CONFLICT, code, "the snapshot offset is beyond the stream's tail")
        }
        Rejection::NotJsonBoundary => ErrorAnswer::new(S::BAD_REQUEST, code, "the offset is inside a JSON message"),
        Rejection::JsonBoundaryUnverified => ErrorAnswer::new(
            S::SERVICE_UNAVAILABLE,
            code,
            "the byte before the offset is in the cold tier; the JSON boundary could not be checked",
        )
        .header("retry-after", 1),
        Rejection::InvalidRetention => ErrorAnswer::new(
            S::BAD_REQUEST,
            code,
            "retention must be at committed data and no newer than the latest snapshot",
        ),
        Rejection::ExpiryNotInFuture => {
            ErrorAnswer::new(S::BAD_REQUEST, code, "stream-expires-at must be in the future")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Extensions §10: a size refusal names the limit it applied, and the
    /// code says which: `SNAPSHOT_TOO_LARGE` for the assembled snapshot.
    #[test]
    fn a_snapshot_too_large_answers_413_with_its_limit_and_code() {
        let limit = 1_073_741_824u64;
        let answer = ApiError::Backend(BackendError::Parts(PartsRefusal::TooLarge { limit })).answer();
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(answer.code, ErrorCode::SnapshotTooLarge);
        assert_eq!(
            answer.headers.get(names::URSULA_MAX_SNAPSHOT_BYTES).map(|v| v.as_bytes()),
            Some(&b"1073741824"[..])
        );
        assert!(answer.headers.get(names::URSULA_MAX_REQUEST_BYTES).is_none());
    }

    /// spec/42 §11 and the 0.8 notes: an intermediary whose upstream sent
    /// no answer's headers in time answers `504 UPSTREAM_TIMEOUT`, a code
    /// whose write outcome is unknown (no `Retry-After`: it may have applied).
    #[test]
    fn an_upstream_that_does_not_answer_in_time_is_504_upstream_timeout() {
        let answer = ApiError::Backend(BackendError::Upstream(UpstreamFailure::TimedOut)).answer();
        assert_eq!((answer.status, answer.code), (StatusCode::GATEWAY_TIMEOUT, ErrorCode::UpstreamTimeout));
        assert_eq!(answer.code.as_str(), "UPSTREAM_TIMEOUT");
    }
}
