//! Integration tests of `ursula-core`: each test starts a real `ursula server`
//! process on 127.0.0.1 with port 0 and talks HTTP to it, as a client would.
//!
//! The rows of the status tables of spec pages 25-29 and 33 that need
//! features of later issues are not covered here:
//! - `Stream-Incarnation` preconditions and tokens: every `412` row (create,
//!   append, read, head, delete), the `400` for a malformed token, and the
//!   `403 producer-expired` answer, which needs the token and an epoch floor.
//! - `307` redirects to a leader or a hosting node (clusters).
//! - `410 Gone` below a retention boundary (retention and snapshots), and the
//!   `Stream-Snapshot-*` headers of `HEAD`.
//! - `503` cluster and admission states: `NO_LEADER`, write admission,
//!   backpressure, leadership confirmation, too many live readers.
//! - `404` for a create in a purged bucket (an admin-plane purge).

// The harness: node processes, request helpers, the SSE reader, codecs.
mod support;

// PUT /{bucket} and PUT /{bucket}/{stream}: ids, headers, idempotency, conflicts.
mod create;

// POST: appends, closes, Stream-Seq, idempotent producers, JSON bodies, size limit.
mod append;

// GET: catch-up, long-poll and SSE reads, offsets, query parameters.
mod read;

// HEAD: stream metadata and server metadata headers.
mod head;

// DELETE, and what a deleted or expired stream answers afterwards.
mod delete;

// The error body of every refusal (extensions §11) and the routes' 404/405.
mod errors;

// JSON reads: NDJSON by default or arrays with --json-reads array, gzip, ETags, 304.
mod json_modes;
