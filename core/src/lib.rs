//! The Ursula node: group engines, stream routing, the in-process backend
//! of the HTTP layer, configuration, and the `ursula` binary.
//!
//! Module map:
//! - `routing`: stream → group, a stable hash.
//! - `engine`: the `GroupEngine` trait, the group state both engines hold,
//!   and the in-memory engine.
//! - `raft`: the durable multi-Raft engine over the WAL.
//! - `backend`: `NodeBackend`, the HTTP layer's `Backend` over an engine.
//! - `stream_plane`: `StreamService`, the private gRPC data plane a gateway calls.
//! - `upstream`, `gateway`: `ursula gateway`, the HTTP surface over the voters' StreamService.
//! - `config`: the config file and CLI overrides.
//! - `node`: starting a node on a bound listener.

pub mod admin;
pub mod backend;
pub mod cold;
pub mod config;
pub mod engine;
pub mod gateway;
pub mod node;
pub mod raft;
pub mod routing;
pub mod stream_plane;
pub mod upstream;
