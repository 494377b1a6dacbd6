//! The one HTTP protocol surface of Ursula, shared by both front doors and
//! knowing neither: routing, header and query parsing, rendering, SSE and
//! long-poll framing, CORS and the error mapping, over the `Backend` seam.
//! A node serves it over its in-process engine, a gateway over gRPC to the
//! voters; what only one of them does is composed around it through
//! `FrontDoor` hooks (a gateway's cache and body budget) or around the
//! connection (a node's gRPC mux).
//!
//! Module map:
//! - `backend`: the `Backend` seam the handlers call, and its errors.
//! - `front`: the `FrontDoor` hooks and the plain body reader.
//! - `names`: the protocol's header names, defined once.
//! - `route`, `query`, `headers`: typed parsing of requests.
//! - `handlers`: one module per operation.
//! - `error`: every refusal mapped once to status, code and headers.
//! - `ops`: typed metrics and readiness, rendered once for every plane.
//! - `render`, `cursor`, `limits`, `options`: answers and settings.
//! - `server`: hyper on a bound listener, worker threads, any service.
//! - `affinity`: pinning those threads to CPUs (`runtime.cpu_affinity`).
//! - `connection`: one client connection, with its header-read and idle timeouts.
//! - `wire`: the `StreamService` messages to and from the seam's values.
//! - `telemetry`: boundary spans, trace context, request counters, the exporter's seam.

pub mod affinity;
pub mod backend;
pub mod connection;
pub mod cursor;
pub mod error;
pub mod front;
pub mod handlers;
pub mod headers;
pub mod inflight;
pub mod limits;
pub mod names;
pub mod ops;
pub mod options;
pub mod query;
pub mod render;
pub mod route;
pub mod server;
pub mod telemetry;
pub mod wire;

pub use backend::{
    Backend, BackendError, ForkStream, LeaderHint, Operations, PartAdmission, PartStaged, PartsCommit, PartsDiscard,
    PartsRefusal, ReadBootstrap, ReadRest, ReadSnapshot, ReadStream, SnapshotParts, StagedPart, Streams, Unavailable,
    UpstreamFailure, WaitOutcome, WaitStream, WriteRoute,
};
pub use connection::ConnectionLimits;
pub use front::{BodyPace, FrontDoor, PlainFrontDoor, Upload};
pub use ops::{Metrics, Readiness, Ready};
pub use options::{Cors, HttpOptions, JsonReads};
pub use server::{Surface, Workers, serve, serve_surface};
