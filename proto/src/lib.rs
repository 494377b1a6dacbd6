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
