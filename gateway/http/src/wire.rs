//! The `StreamService` wire: the state machine's values in and out of its
//! messages, and every failure to and from its typed form. One place, used
//! by the voters' server and by a gateway's client alike.

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;
pub use ursula_proto::stream::v1 as pb;
use ursula_stream::{ReadView, Rejection};

use crate::backend::{BackendError, LeaderHint, PartsRefusal, Unavailable, WriteRoute};

/// Bytes that do not decode as what they claim to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode {what}: {reason}")]
pub struct WireError {
    pub what: &'static str,
    pub reason: String,
}

/// A value in the state machine's encoding (postcard, as in the Raft log).
pub fn encode<T: Serialize>(value: &T) -> Bytes {
    // Serializing these plain values into a growable buffer cannot fail.
    postcard::to_allocvec(value).map(Bytes::from).unwrap_or_default()
}

pub fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, WireError> {
    postcard::from_bytes(bytes).map_err(|e| WireError { what, reason: e.to_string() })
}

/// A read's payload travels as plain bytes; the rest of the view encoded.
pub fn read_chunk(mut view: ReadView) -> pb::ReadChunk {
    let chunks = std::mem::take(&mut view.chunks);
    pb::ReadChunk { encoded_view: encode(&view), chunks }
}

pub fn read_view(chunk: pb::ReadChunk) -> Result<ReadView, WireError> {
    let mut view: ReadView = decode("a read view", &chunk.encoded_view)?;
    view.chunks = chunk.chunks;
    Ok(view)
}

pub fn leader_hint(h: &LeaderHint) -> pb::LeaderHint {
    pb::LeaderHint { node_id: h.leader_id, client_url: h.client_url.clone(), term: h.term }
}

fn kind(kind: pb::failure::Kind) -> pb::Failure {
    pb::Failure { kind: Some(kind) }
}

/// The failure a node answers instead of serving a call it does not lead;
/// `None` when it leads.
pub fn not_leading(route: &WriteRoute) -> Option<pb::Failure> {
    use pb::failure::Kind;
    match route {
        WriteRoute::Local => None,
        WriteRoute::Leader(hint) => {
            Some(kind(Kind::NotLeader(pb::NotLeader { group: hint.group, leader: Some(leader_hint(hint)) })))
        }
        WriteRoute::NoLeader { group } => {
            Some(kind(Kind::NoLeader(pb::NoLeader { group: *group, retry_after_secs: 1 })))
        }
    }
}

pub fn invalid(message: impl Into<String>) -> pb::Failure {
    kind(pb::failure::Kind::Invalid(pb::Invalid { message: message.into() }))
}

pub fn cluster_mismatch(cluster_id: &str, node_id: u64) -> pb::Failure {
    kind(pb::failure::Kind::ClusterMismatch(pb::ClusterMismatch { cluster_id: cluster_id.to_owned(), node_id }))
}

/// `e`, met serving a call about a stream of `group`.
pub fn failure(group: u32, e: &BackendError) -> pb::Failure {
    use pb::failure::Kind;
    kind(match e {
        BackendError::Rejected(r) => {
            Kind::Rejected(pb::Rejected { code: r.code().as_str().to_owned(), encoded_rejection: encode(r) })
        }
        BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs } => {
            Kind::NoLeader(pb::NoLeader { group, retry_after_secs: *retry_after_secs })
        }
        BackendError::Unavailable { reason, retry_after_secs } => Kind::Unavailable(pb::Unavailable {
            reason: unavailable_reason(*reason) as i32,
            retry_after_secs: *retry_after_secs,
        }),
        BackendError::ColdStoreFailed(message) => {
            Kind::ColdStoreFailed(pb::ColdStoreFailed { message: message.clone() })
        }
        BackendError::NoColdStore => Kind::NoColdStore(pb::NoColdStore {}),
        BackendError::Parts(r) => {
            Kind::PartsRefused(pb::PartsRefused { code: r.code().as_str().to_owned(), encoded_refusal: encode(r) })
        }
        BackendError::OutcomeUnknown { retry_after_secs } => {
            Kind::OutcomeUnknown(pb::OutcomeUnknown { retry_after_secs: *retry_after_secs })
        }
        BackendError::Internal(message) => Kind::Internal(pb::Internal { message: message.clone() }),
        // A gateway's own failure; a node never answers it, and a gateway
        // that relayed it would be a fault.
        BackendError::Upstream(u) => Kind::Internal(pb::Internal { message: format!("an upstream failure {u:?}") }),
    })
}

/// The wire's reason for an unavailability; `NoLeader` travels as its own kind.
fn unavailable_reason(reason: Unavailable) -> pb::unavailable::Reason {
    use pb::unavailable::Reason;
    match reason {
        Unavailable::NoLeader => Reason::Unspecified,
        Unavailable::WalDiskPressure => Reason::WalDiskPressure,
        Unavailable::ColdBackpressure => Reason::ColdBackpressure,
        Unavailable::IngressBodyBytes => Reason::IngressBodyBytesLimitReached,
        Unavailable::RaftUncommitted => Reason::RaftUncommittedBackpressure,
        Unavailable::LiveReads => Reason::LiveReadBackpressure,
        Unavailable::RaftLogPressure => Reason::RaftLogPressure,
        Unavailable::ApplyStopped => Reason::ApplyStopped,
        Unavailable::HistoryPending => Reason::HistoryPending,
    }
}

fn unavailable_of(reason: pb::unavailable::Reason) -> Option<Unavailable> {
    use pb::unavailable::Reason;
    Some(match reason {
        Reason::Unspecified => return None,
        Reason::WalDiskPressure => Unavailable::WalDiskPressure,
        Reason::ColdBackpressure => Unavailable::ColdBackpressure,
        Reason::IngressBodyBytesLimitReached => Unavailable::IngressBodyBytes,
        Reason::RaftUncommittedBackpressure => Unavailable::RaftUncommitted,
        Reason::LiveReadBackpressure => Unavailable::LiveReads,
        Reason::RaftLogPressure => Unavailable::RaftLogPressure,
        Reason::ApplyStopped => Unavailable::ApplyStopped,
        Reason::HistoryPending => Unavailable::HistoryPending,
    })
}

/// A failure as its caller acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// What the HTTP layer answers as it would for a node.
    Backend(BackendError),
    /// Ask the named leader (or find one); nothing was proposed.
    NotLeader { group: u32, leader: Option<LeaderHint> },
    /// The caller sent something the node could not take.
    Invalid(String),
    /// The node belongs to another cluster.
    ClusterMismatch { cluster_id: String, node_id: u64 },
}

pub fn refused(f: pb::Failure) -> Refused {
    use pb::failure::Kind;
    let unavailable =
        |reason, retry_after_secs| Refused::Backend(BackendError::Unavailable { reason, retry_after_secs });
    match f.kind {
        Some(Kind::Rejected(r)) => match decode::<Rejection>("a rejection", &r.encoded_rejection) {
            Ok(rejection) => Refused::Backend(BackendError::Rejected(rejection)),
            Err(e) => Refused::Backend(BackendError::Internal(format!("{e} (code {})", r.code))),
        },
        Some(Kind::NotLeader(n)) => Refused::NotLeader {
            group: n.group,
            leader: n.leader.map(|h| LeaderHint {
                client_url: h.client_url,
                leader_id: h.node_id,
                group: n.group,
                term: h.term,
            }),
        },
        Some(Kind::NoLeader(n)) => unavailable(Unavailable::NoLeader, n.retry_after_secs),
        Some(Kind::Unavailable(u)) => match pb::unavailable::Reason::try_from(u.reason).ok().and_then(unavailable_of) {
            Some(reason) => unavailable(reason, u.retry_after_secs),
            None => {
                Refused::Backend(BackendError::Internal(format!("an unavailability of no known reason ({})", u.reason)))
            }
        },
        Some(Kind::NoColdStore(_)) => Refused::Backend(BackendError::NoColdStore),
        Some(Kind::PartsRefused(p)) => match decode::<PartsRefusal>("a parts refusal", &p.encoded_refusal) {
            Ok(refusal) => Refused::Backend(BackendError::Parts(refusal)),
            Err(e) => Refused::Backend(BackendError::Internal(format!("{e} (code {})", p.code))),
        },
        Some(Kind::ColdStoreFailed(c)) => Refused::Backend(BackendError::ColdStoreFailed(c.message)),
        Some(Kind::OutcomeUnknown(o)) => {
            Refused::Backend(BackendError::OutcomeUnknown { retry_after_secs: o.retry_after_secs })
        }
        Some(Kind::Internal(i)) => Refused::Backend(BackendError::Internal(i.message)),
        Some(Kind::Invalid(i)) => Refused::Invalid(i.message),
        Some(Kind::ClusterMismatch(c)) => Refused::ClusterMismatch { cluster_id: c.cluster_id, node_id: c.node_id },
        None => Refused::Backend(BackendError::Internal("a failure of no known kind".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::UpstreamFailure;
    use ursula_stream::Offset;

    /// One of each kind of `BackendError` (and of each unavailability and
    /// parts refusal). `kind_of` has no wildcard: a new variant does not
    /// compile until it is listed here and mapped on the wire.
    fn every_error() -> Vec<BackendError> {
        let errors = vec![
            BackendError::Rejected(Rejection::StreamNotFound),
            BackendError::Rejected(Rejection::BucketNotFound),
            BackendError::Rejected(Rejection::ProducerSeqGap { expected: 4, received: 9 }),
            BackendError::Rejected(Rejection::StreamClosed { tail: Offset(77) }),
            BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs: 1 },
            BackendError::Unavailable { reason: Unavailable::WalDiskPressure, retry_after_secs: 5 },
            BackendError::Unavailable { reason: Unavailable::ColdBackpressure, retry_after_secs: 1 },
            BackendError::Unavailable { reason: Unavailable::IngressBodyBytes, retry_after_secs: 1 },
            BackendError::Unavailable { reason: Unavailable::RaftUncommitted, retry_after_secs: 1 },
            BackendError::Unavailable { reason: Unavailable::LiveReads, retry_after_secs: 1 },
            BackendError::Unavailable { reason: Unavailable::RaftLogPressure, retry_after_secs: 5 },
            BackendError::Unavailable { reason: Unavailable::ApplyStopped, retry_after_secs: 5 },
            BackendError::Unavailable { reason: Unavailable::HistoryPending, retry_after_secs: 1 },
            BackendError::OutcomeUnknown { retry_after_secs: 1 },
            BackendError::NoColdStore,
            BackendError::Parts(PartsRefusal::UnknownPart),
            BackendError::Parts(PartsRefusal::DigestMismatch),
            BackendError::Parts(PartsRefusal::TooLarge { limit: 9 }),
            BackendError::Parts(PartsRefusal::StagedLimit {
                incarnation: ursula_stream::Incarnation::from_value(1 << 52).expect("an incarnation"),
                bytes: true,
                limit: 7,
            }),
            BackendError::Parts(PartsRefusal::CommitsBusy),
            BackendError::Parts(PartsRefusal::CommitInProgress),
            BackendError::ColdStoreFailed("gone".into()),
            BackendError::Internal("disk on fire".into()),
        ];
        let kinds: std::collections::BTreeSet<&str> = errors.iter().map(kind_of).collect();
        assert_eq!(kinds.len(), 20, "every kind is listed: {kinds:?}");
        errors
    }

    fn kind_of(e: &BackendError) -> &'static str {
        match e {
            BackendError::Rejected(_) => "rejected",
            BackendError::Unavailable { reason: Unavailable::NoLeader, .. } => "no leader",
            BackendError::Unavailable { reason: Unavailable::WalDiskPressure, .. } => "wal",
            BackendError::Unavailable { reason: Unavailable::ColdBackpressure, .. } => "cold backpressure",
            BackendError::Unavailable { reason: Unavailable::IngressBodyBytes, .. } => "ingress",
            BackendError::Unavailable { reason: Unavailable::RaftUncommitted, .. } => "uncommitted",
            BackendError::Unavailable { reason: Unavailable::LiveReads, .. } => "live reads",
            BackendError::Unavailable { reason: Unavailable::RaftLogPressure, .. } => "log pressure",
            BackendError::Unavailable { reason: Unavailable::ApplyStopped, .. } => "apply stopped",
            BackendError::Unavailable { reason: Unavailable::HistoryPending, .. } => "history pending",
            BackendError::OutcomeUnknown { .. } => "outcome unknown",
            BackendError::NoColdStore => "no cold store",
            BackendError::Parts(PartsRefusal::UnknownPart) => "unknown part",
            BackendError::Parts(PartsRefusal::DigestMismatch) => "digest",
            BackendError::Parts(PartsRefusal::TooLarge { .. }) => "too large",
            BackendError::Parts(PartsRefusal::StagedLimit { .. }) => "staged",
            BackendError::Parts(PartsRefusal::CommitsBusy) => "busy",
            BackendError::Parts(PartsRefusal::CommitInProgress) => "in progress",
            BackendError::ColdStoreFailed(_) => "cold failed",
            BackendError::Internal(_) => "internal",
            BackendError::Upstream(_) => "upstream",
        }
    }

    #[test]
    fn every_failure_maps_back_to_what_it_was() {
        for e in every_error() {
            assert_eq!(refused(failure(3, &e)), Refused::Backend(e.clone()), "{e:?}");
        }
    }

    #[test]
    fn a_gateway_failure_never_travels_as_itself() {
        for u in [UpstreamFailure::NoUpstream, UpstreamFailure::Unreachable, UpstreamFailure::TimedOut] {
            let back = refused(failure(1, &BackendError::Upstream(u)));
            assert!(matches!(back, Refused::Backend(BackendError::Internal(_))), "{back:?}");
        }
    }

    #[test]
    fn an_unavailability_of_no_known_reason_is_internal_not_a_guess() {
        let f = kind(pb::failure::Kind::Unavailable(pb::Unavailable { reason: 0, retry_after_secs: 1 }));
        assert!(matches!(refused(f), Refused::Backend(BackendError::Internal(_))));
    }

    #[test]
    fn a_route_elsewhere_is_a_typed_not_leader() {
        let hint = LeaderHint { client_url: "http://127.0.0.1:9".into(), leader_id: 3, group: 5, term: 8 };
        assert_eq!(not_leading(&WriteRoute::Local), None);
        let f = not_leading(&WriteRoute::Leader(hint.clone())).expect("a failure");
        assert_eq!(refused(f), Refused::NotLeader { group: 5, leader: Some(hint) });
        let f = not_leading(&WriteRoute::NoLeader { group: 2 }).expect("a failure");
        assert_eq!(
            refused(f),
            Refused::Backend(BackendError::Unavailable { reason: Unavailable::NoLeader, retry_after_secs: 1 })
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_value() {
        let f = kind(pb::failure::Kind::Rejected(pb::Rejected {
            code: "STREAM_NOT_FOUND".into(),
            encoded_rejection: Bytes::from_static(&[0xff, 0xff, 0xff]),
        }));
        assert!(matches!(refused(f), Refused::Backend(BackendError::Internal(_))));
        assert!(read_view(pb::ReadChunk { encoded_view: Bytes::from_static(b"\x01"), chunks: vec![] }).is_err());
    }
}
