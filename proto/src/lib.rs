//! `ursula-proto`: the private gRPC protocols of an Ursula cluster,
//! generated from the `.proto` files under `ursula/`.
//!
//! Module map:
//! - `raft::v1`: `RaftService`, Raft between the voters of a cluster.
//! - `stream::v1`: `StreamService`, the data plane a gateway calls.
//! - `read_wire`: `Read` answers sent and read without copying their bytes.

pub mod raft {
    pub mod v1 {
        tonic::include_proto!("ursula.raft.v1");
    }
}

pub mod read_wire;

pub mod stream {
    pub mod v1 {
        tonic::include_proto!("ursula.stream.v1");
    }
}

/// The largest gRPC message either way on both planes: a 32 MiB append or
/// an 8 MiB read with room to spare, and Raft batches bounded below it.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// HTTP/2 flow control of the gRPC hops. One connection carries every call
/// between two processes (a gateway's to a voter, a voter's to a peer), and
/// hyper's server default of 1 MiB for a whole connection holds every call
/// behind a large body's window updates. Receivers may buffer this much
/// unread: per call, and per connection.
pub const H2_STREAM_WINDOW: u32 = 8 * 1024 * 1024;
pub const H2_CONNECTION_WINDOW: u32 = 32 * 1024 * 1024;
/// Fewer, larger frames for megabyte messages (HTTP/2 allows up to 16 MiB).
pub const H2_MAX_FRAME: u32 = 1024 * 1024;
/// What a server queues of one response before waiting for the client.
pub const H2_MAX_SEND_BUFFER: usize = 8 * 1024 * 1024;
