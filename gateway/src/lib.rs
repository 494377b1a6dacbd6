//! The HTTP protocol surface of Ursula: routing, header and query parsing,
//! rendering, SSE and long-poll framing, CORS, over a `Backend` trait. A
//! node serves it over its in-process engine; the gateway fleet will serve
//! it over gRPC to the voters.
//!
//! Module map:
//! - `backend`: the `Backend` trait the handlers call.
//! - `route`, `query`, `headers`: typed parsing of requests.
//! - `handlers`: one module per operation.
//! - `error`: every refusal mapped once to status, code and headers.
//! - `render`, `cursor`, `limits`, `options`: answers and settings.
//! - `immutable_cache`: a gateway's bounded cache of immutable answers.
//! - `server`: hyper on a bound listener.
//! - `wire`: the `StreamService` messages to and from the state machine's values.

pub mod backend;
pub mod cursor;
pub mod error;
pub mod handlers;
pub mod headers;
pub mod immutable_cache;
pub mod limits;
pub mod options;
pub mod query;
pub mod render;
pub mod route;
pub mod server;
pub mod uploads;
pub mod wire;

pub use backend::{
    Backend, BackendError, LeaderHint, PartAdmission, PartsCommit, PartsDiscard, Readiness, StagedPart, Unavailable,
    WaitOutcome, WriteRoute,
};
pub use options::{CacheOptions, Cors, HttpOptions, JsonReads};
pub use server::{GrpcBody, GrpcPlane, serve};
pub use uploads::{UploadLimits, UploadLimitsError};
