//! Integration tests of the `ursula` binary's two front doors. By default a
//! test's `Node` is the development node running inside the test process
//! on 127.0.0.1 with port 0 (time behind a clock the test moves on); with
//! `URSULA_TEST_ENGINE=raft` it is a Raft node process, with `=gateway` an
//! `ursula gateway` process in front of three voters. Tests that need real
//! processes (durability, clusters, gateways, the cold tier) start them.
//! The base protocol's routes have one module each (`create` ... `json_modes`);
//! the extensions (spec/42 and its API pages) have one `ext_*` module per
//! section, and `docs_examples` runs the curl examples of docs/extensions.md.
//!
//! Not covered, because a single node without a cold backend or an admin
//! plane cannot reach them, or only after days:
//! - `307` redirects to a leader or a hosting node, and the `503` cluster and
//!   admission states: `NO_LEADER`, write admission, backpressure, leadership
//!   confirmation, too many live readers.
//! - Snapshot upload in parts beyond its `501`, `JSON_BOUNDARY_UNVERIFIED`
//!   (history rewrites are in `backup`: a restore needs a cluster).
//! - Producer forgetting after 7 idle days, eviction past the 4,096 cap after an
//!   idle hour, and the epoch floor with `403 producer-expired` (unit-tested in
//!   the state machine).
//! - `404` for a create in a purged bucket (an admin-plane purge).

// The harness: node processes, request helpers, the SSE reader, codecs.
mod support;

// PUT /{bucket} and PUT /{bucket}/{stream}: ids, headers, idempotency, conflicts.
mod create;

// POST: appends, closes, Stream-Seq, JSON bodies, size limit.
mod append;

// POST with producer headers, base protocol: header values, duplicates, seq gaps, new epochs, closes.
mod producers;

// GET: catch-up, long-poll and SSE reads, offsets, query parameters.
mod read;

// HEAD: stream metadata and server metadata headers.
mod head;

// DELETE, and what a deleted or expired stream answers afterwards.
mod delete;
// Forks (docs/forks.md).
mod forks;

// Connection timeouts: slow heads, idle connections, stalled bodies; live reads are not idle.
mod connections;

// Cache-Control of every kind of answer: no-store, SSE no-cache and no-store.
mod caching;

// The error body of every refusal (extensions §11) and the routes' 404/405.
mod errors;

// JSON reads: NDJSON by default or arrays with --json-reads array, gzip, ETags, 304.
mod json_modes;

// Extensions §1: bucket and stream id rules, implicit buckets, 404 for other 3+-segment paths.
mod ext_ids;

// Extensions §2.4: Stream-Incarnation on answers, its change on recreate, the precondition.
mod ext_incarnation;

// Extensions §2.2/§2.5, spec/30, spec/31: snapshot publish, digest, conflicts, ranged reads, parts → 501.
mod ext_snapshots;

// Extensions §2.2 retention: PUT …/retention/{offset}, monotonic and exact, 410 below it.
mod ext_retention;

// Extensions §3, spec/32: /bootstrap as multipart/mixed, complete and partial answers, the 8 MiB rule.
mod ext_bootstrap;

// Extensions §4, spec/44: immutable chunk and snapshot resources, Stream-Immutable, ETags, error rows.
mod ext_immutable;

// Extensions §5: receipts, repeats, epoch closure, producer 403s, digests, the producer cap, Stream-Seq.
mod ext_write_keys;

// Extensions §7-§10: max_bytes, timeout_ms, consistency, NDJSON, binary SSE, server metadata headers.
mod ext_read_path;

// Extensions §11: the JSON error body of every extension refusal; HEAD errors without a body.
mod ext_errors;

// spec/35 "Usage export": a voter's committed usage (issue 19).
mod usage;

// docs/extensions.md: runs each section's curl examples against a node, so they cannot rot.
mod docs_examples;

// spec/07 Raft, issue 5: kill -9 crash loops, clean restarts, the cluster id, the disk guard, damaged WALs.
mod durability;

// spec/35 format epoch 5: the WAL directory's and the object store's markers, refusals before any write.
mod format_epoch;

// spec/35 "Upgrading", spec/38: the Raft protocol's format epoch between voters, at start and later.
mod raft_protocol;

// spec/35 "Deleted data": the journal frees segments a quiet group's few entries kept.
mod journal;

// Issue 6 (first step): a three-voter cluster over the gRPC cluster plane.
mod cluster;

// spec/35 crash recovery: recovery gates after a lost run state or a damaged journal, a follower's lost entries.
mod cluster_recovery;

// spec/35 recovery plans: accept-unsynced-loss after every voter of a group may have lost its tail.
mod recovery_plan;

// Issue 6: partitions (per-link TCP proxies), kill -9 and restarts under writers and linearizable readers.
mod cluster_faults;

// A group's replication pipelined: large and small appends reach the followers in order.
mod cluster_pipeline;

// Leadership: the admin transfer route, balance over the voters, hand-off on SIGTERM, failover figures, five voters.
mod cluster_leadership;

// A transfer asked while a large write is under way lets it finish first.
mod transfer_fence;

// `ursulactl` against real voters: a rolling restart it drives, its gates and exit codes.
mod ctl;

// Tenant offboarding: a bucket purge over three voters and S3, its proof and its fence.
mod purge;

// Backups: backup-create of a live cluster, backup-verify, restore into a fresh cluster (the recovery drill).
mod backup;

// deploy/: the example configs of spec/06 start a cluster; `ursula config check`, `ursula gateway --check`.
mod deploy;

// StreamService, the private gRPC data plane on each node's client port.
mod stream_plane;

// `ursula gateway` in front of three voters: leader routing, failover, exactly once.
mod gateway;

// `ursula gateway` live reads: one shared upstream watch, SSE resumes across a leader kill.
mod gateway_live;

// `ursula gateway` bodies: the shared body budget and its headroom, slow-body cuts.
mod gateway_bodies;
// A read streamed through a gateway whose voter link breaks mid-answer.
mod gateway_reads;
// A gateway's append batches (issue 24).
mod gateway_batches;

// Access control: tokens, the bucket policy, concealment (spec/08).
mod gateway_auth;

// Tenant quotas at the gateway (issue 19).
mod gateway_quotas;

// The gateway's usage log (issue 19).
mod gateway_usage;

// Issue 7: the S3 cold tier on three voters and an s3s-fs server: flush, reads across tiers, outage, damage.
mod cold;
// Issue 24: cold reads fetch only the blocks they need.
mod cold_blocks;
mod cold_parts;
// spec/07 storage.cold.compaction_enabled: a stream's small packs rewritten into one object.
mod cold_compaction;

// Issue 7: Raft snapshots as S3 objects each voter owns; a wiped voter installs a copy.
mod snapshot_store;

// Observability (spec/37): OTLP traces across gateway, follower and leader; metrics; nothing without the variables.
mod telemetry;

// Admission backpressure: the inflight body budget, the live-read cap, the log pressure gate.
mod backpressure;
// A follower under WAL disk pressure takes no entries (found by the soak).
mod disk_pressure;

// Partitions, one-way cuts and a slow follower between voters in network namespaces.
mod netns;
