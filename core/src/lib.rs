//! The Ursula voter node: group engines (in memory, or multi-Raft over the
//! WAL), the node's `Backend` of the HTTP surface, the private gRPC planes,
//! the cold tier, configuration and the admin plane. It never links the
//! gateway; the `ursula` binary (`bin/`) composes both.
//!
//! Module map:
//! - `engine`: the `GroupEngine` trait, the group state both engines hold,
//!   and the in-memory engine.
//! - `raft`: the durable multi-Raft engine over the WAL.
//! - `memory_cap`: `runtime.node_memory_abort_cap_size`, the emergency abort.
//! - `backend`: `NodeBackend`, the HTTP layer's `Backend` over an engine.
//! - `stream_plane`: `StreamService`, the private gRPC data plane a gateway calls.
//! - `mux`: the client listener's split between gRPC and the HTTP surface.
//! - `raw_read`: `StreamService/Read` answered without copying its bytes.
//! - `clock`: the one `now` of a node, behind a trait.
//! - `cold`: the S3 cold tier: flush, reads, snapshot parts, GC.
//! - `admin`: the admin plane (`server.admin_listen`).
//! - `backup`: exporting a group's state for a backup.
//! - `config`: the config file and CLI overrides.
//! - `node`: starting a node on a bound listener.
//! - `process`: this process's identity.
//! - `purge`: erasing a bucket from every group and the cold store.

pub mod admin;
pub mod backend;
pub mod backup;
pub mod clock;
pub mod cold;
pub mod config;
pub mod engine;
pub mod format_epoch;
mod memory_cap;
pub mod mux;
pub mod node;
pub mod process;
pub mod purge;
pub mod raft;
mod raw_read;
pub mod stream_plane;
