//! The journal against real files, one test binary: torn tails and
//! corruption, purge and reclaim, reopen idempotence, truncation, group
//! commit under concurrency, and a model-checked property test.

mod common;
mod compact;
mod concurrency;
mod inline;
mod model;
mod purge;
mod recovery;
mod semantics;
