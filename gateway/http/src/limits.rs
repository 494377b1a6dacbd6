//! Size limits of the protocol (extensions §9.3, §10).

/// The protocol's request body limit: 32 MiB.
pub const MAX_REQUEST_BYTES: u64 = 32 * 1024 * 1024;
/// The cap on the stream bytes of one read response or SSE data event: 8 MiB.
pub const MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;
/// Long-poll wait when `timeout_ms` is absent or unparseable (extensions §9.1).
pub const DEFAULT_LONG_POLL_MS: u64 = 1000;
pub const MAX_LONG_POLL_MS: u64 = 60_000;
/// JSON reads at least this large are gzipped for clients that accept it.
pub const GZIP_MIN_BYTES: usize = 256;
