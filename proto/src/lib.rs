//! `ursula-proto`: the private gRPC protocols of an Ursula cluster,
//! generated from the `.proto` files under `ursula/`.
//!
//! Module map:
//! - `raft::v1`: `RaftService`, Raft between the voters of a cluster.
//! - `stream::v1`: `StreamService`, the data plane a gateway calls.

pub mod raft {
    pub mod v1 {
        tonic::include_proto!("ursula.raft.v1");
    }
}

pub mod stream {
    pub mod v1 {
        tonic::include_proto!("ursula.stream.v1");
    }
}

/// The largest gRPC message either way on both planes: a 32 MiB append or
/// an 8 MiB read with room to spare, and Raft batches bounded below it.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
