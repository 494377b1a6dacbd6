//! The protocol's header names, defined once (lowercase, as HTTP/2 sends
//! them), as `HeaderName`s so that a lookup or an insert parses no name.

use http::HeaderName;

pub const STREAM_NEXT_OFFSET: HeaderName = HeaderName::from_static("stream-next-offset");
pub const STREAM_OFFSET: HeaderName = HeaderName::from_static("stream-offset");
pub const STREAM_UP_TO_DATE: HeaderName = HeaderName::from_static("stream-up-to-date");
pub const STREAM_CLOSED: HeaderName = HeaderName::from_static("stream-closed");
pub const STREAM_CURSOR: HeaderName = HeaderName::from_static("stream-cursor");
pub const STREAM_TTL: HeaderName = HeaderName::from_static("stream-ttl");
pub const STREAM_EXPIRES_AT: HeaderName = HeaderName::from_static("stream-expires-at");
pub const STREAM_SEQ: HeaderName = HeaderName::from_static("stream-seq");
pub const STREAM_FORKED_FROM: HeaderName = HeaderName::from_static("stream-forked-from");
pub const STREAM_FORK_OFFSET: HeaderName = HeaderName::from_static("stream-fork-offset");
pub const STREAM_FORK_SUB_OFFSET: HeaderName = HeaderName::from_static("stream-fork-sub-offset");
pub const STREAM_LAST_SEQ: HeaderName = HeaderName::from_static("stream-last-seq");
pub const STREAM_SSE_DATA_ENCODING: HeaderName = HeaderName::from_static("stream-sse-data-encoding");
pub const STREAM_DATA_CONTENT_TYPE: HeaderName = HeaderName::from_static("stream-data-content-type");
pub const PRODUCER_ID: HeaderName = HeaderName::from_static("producer-id");
pub const PRODUCER_EPOCH: HeaderName = HeaderName::from_static("producer-epoch");
pub const PRODUCER_SEQ: HeaderName = HeaderName::from_static("producer-seq");
pub const PRODUCER_EXPECTED_SEQ: HeaderName = HeaderName::from_static("producer-expected-seq");
pub const PRODUCER_RECEIVED_SEQ: HeaderName = HeaderName::from_static("producer-received-seq");
pub const PRODUCER_OUTCOME: HeaderName = HeaderName::from_static("producer-outcome");
pub const PRODUCER_CLOSED_EPOCH: HeaderName = HeaderName::from_static("producer-closed-epoch");
pub const PRODUCER_CLOSED_SEQ: HeaderName = HeaderName::from_static("producer-closed-seq");
pub const PRODUCER_DIGEST: HeaderName = HeaderName::from_static("producer-digest");
pub const URSULA_PROTOCOL: HeaderName = HeaderName::from_static("ursula-protocol");
pub const STREAM_INCARNATION: HeaderName = HeaderName::from_static("stream-incarnation");
pub const STREAM_RETAINED_OFFSET: HeaderName = HeaderName::from_static("stream-retained-offset");
pub const STREAM_PREVIOUS_INCARNATION: HeaderName = HeaderName::from_static("stream-previous-incarnation");
pub const STREAM_INHERITED_OFFSET: HeaderName = HeaderName::from_static("stream-inherited-offset");
pub const STREAM_SNAPSHOT_OFFSET: HeaderName = HeaderName::from_static("stream-snapshot-offset");
pub const STREAM_SNAPSHOT_DIGEST: HeaderName = HeaderName::from_static("stream-snapshot-digest");
pub const STREAM_SNAPSHOT_PARTS: HeaderName = HeaderName::from_static("stream-snapshot-parts");
pub const STREAM_IMMUTABLE: HeaderName = HeaderName::from_static("stream-immutable");
pub const STREAM_READ_ORIGIN: HeaderName = HeaderName::from_static("stream-read-origin");
pub const URSULA_CLUSTER_ID: HeaderName = HeaderName::from_static("ursula-cluster-id");
pub const URSULA_MAX_REQUEST_BYTES: HeaderName = HeaderName::from_static("ursula-max-request-bytes");
pub const URSULA_MAX_SNAPSHOT_BYTES: HeaderName = HeaderName::from_static("ursula-max-snapshot-bytes");
pub const URSULA_MAX_STAGED_PARTS: HeaderName = HeaderName::from_static("ursula-max-staged-parts");
pub const URSULA_MAX_STAGED_BYTES: HeaderName = HeaderName::from_static("ursula-max-staged-bytes");
pub const STREAM_SNAPSHOT_PART: HeaderName = HeaderName::from_static("stream-snapshot-part");
pub const RAFT_LEADER_ID: HeaderName = HeaderName::from_static("x-ursula-raft-leader-id");
pub const RAFT_GROUP: HeaderName = HeaderName::from_static("x-ursula-raft-group");
pub const RAFT_TERM: HeaderName = HeaderName::from_static("x-ursula-raft-term");
