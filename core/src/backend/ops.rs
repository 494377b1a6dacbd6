//! `Operations` of a node: the figures of `/__ursula/metrics` (the
//! engine's, the cold tier's and the node's own) and its readiness, served
//! alike on the client plane and the admin plane.

use ursula_http::{Metrics, Operations, Readiness};
use ursula_stream::routing::GroupId;
use ursula_stream::usage::{BucketUsage, WRITE_UNIT_BYTES};

use super::NodeBackend;
use crate::engine::GroupEngine;

impl<E: GroupEngine> Operations for NodeBackend<E> {
    async fn metrics(&self) -> Metrics {
        let groups = self.engine.group_count();
        let streams: u64 =
            (0..groups).filter_map(|g| self.engine.query(GroupId(g), |store, _| store.len() as u64).ok()).sum();
        let mut fields = self.engine.metrics();
        if let Some(cold) = &self.cold {
            cold.metrics(&mut fields);
        }
        let mut m = Metrics::from(fields);
        m.text("engine", self.engine.name());
        m.count("group_count", u64::from(groups));
        m.count("streams", streams);
        m.count("live_readers", self.live_readers());
        m.text("process_incarnation", crate::process::process_incarnation());
        m
    }

    fn usage(&self) -> Option<serde_json::Value> {
        let groups = self.engine.group_count();
        let mut buckets: std::collections::BTreeMap<String, BucketUsage> = Default::default();
        for g in 0..groups {
            let Ok(report) = self.engine.query(GroupId(g), |store, now| store.usage_report(now)) else { continue };
            for (bucket, line) in report {
                buckets.entry(bucket.as_str().to_string()).or_default().add(&line);
            }
        }
        let mut report = serde_json::json!({
            "version": 1,
            "node_id": self.engine.node_id(),
            "write_unit_bytes": WRITE_UNIT_BYTES,
            "buckets": buckets,
            "raft_group_count": groups,
        });
        // Without a cold store no part can be staged. With one, the per-term
        // counting of staged parts is not built yet: the field is left out
        // rather than claim none.
        if self.cold.is_none() {
            report["staged_snapshot_parts"] = serde_json::json!([]);
        }
        Some(report)
    }

    fn readiness(&self) -> Readiness {
        let mut readiness = match self.engine.unready_reason() {
            None => Readiness::ready(),
            Some(reason) => Readiness::unready(reason),
        };
        readiness.details = Metrics::from(self.engine.readiness_details());
        readiness
    }
}
