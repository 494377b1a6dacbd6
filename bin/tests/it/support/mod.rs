//! The harness of the integration tests.
//!
//! Module map:
//! - `node`: `Node`, a node or gateway under test (in the test process by
//!   default, a real `ursula` process where it matters), request helpers.
//! - `in_process`: the development node inside the test process, its time
//!   behind a `ManualClock`.
//! - `lifecycle`: `kill -9`, `SIGTERM`, stderr, a binary that must refuse.
//! - `http`: `Req` and `Answer` over reqwest; one raw HTTP/1.1 exchange.
//! - `sse`: reading Server-Sent Events.
//! - `checks`: collecting the failures of many table rows.
//! - `codecs`: offsets, digests, base64, body patterns.
//! - `cluster`: voters, gateways and their layouts; `s3`: an S3 server.
//! - `issuer`: an OAuth-style issuer (keys, JWKS, metadata) and its tokens.

mod checks;
pub mod cluster;
mod codecs;
mod http;
mod in_process;
pub mod issuer;
mod lifecycle;
mod node;
pub mod otlp;
pub mod proxy;
pub mod s3;
mod sse;

use std::time::Duration;

pub use checks::Checks;
pub use codecs::*;
pub use http::{Answer, Req, read_raw_response};
pub use lifecycle::run_to_exit;
pub use node::Node;
pub use sse::{Event, Sse, sse_payload};

/// How long a node may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for any single request or SSE event, so a hang fails the
/// test instead of the whole run. Generous: the machine is shared.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The protocol's request limit (extensions §10).
pub const MAX_REQUEST_BYTES: u64 = 32 * 1024 * 1024;

/// Whether `Node::start` puts a gateway in front of three voters
/// (`URSULA_TEST_ENGINE=gateway`).
pub fn through_gateway() -> bool {
    std::env::var("URSULA_TEST_ENGINE").is_ok_and(|e| e == "gateway")
}
