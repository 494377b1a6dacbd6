//! `Operations` of a node: the figures of `/__ursula/metrics` (the
//! engine's, the cold tier's and the node's own) and its readiness, served
//! alike on the client plane and the admin plane.

use ursula_http::{Metrics, Operations, Readiness};
use ursula_stream::routing::{GroupId, group_of};
use ursula_stream::usage::{BucketUsage, WRITE_UNIT_BYTES};

use super::NodeBackend;
use crate::engine::{GroupEngine, Leadership};

impl<E: GroupEngine> Operations for NodeBackend<E> {
    async fn metrics(&self) -> Metrics {
        let groups = self.engine.group_count();
        let (mut streams, mut mutations, mut apply_ns) = (0u64, 0u64, 0u64);
        let mut gauges = Vec::with_capacity(groups as usize);
        for g in 0..groups {
            let Ok(state) = self.engine.state(GroupId(g)) else { continue };
            let state = crate::engine::group_state::lock(state);
            let held = state.store.gauges();
            streams += held.streams;
            mutations += state.mutations_applied;
            apply_ns += state.apply_ns;
            gauges.push((g, held));
        }
        let mut fields = self.engine.metrics();
        if let Some(cold) = &self.cold {
            cold.metrics(&mut fields);
        }
        let mut m = Metrics::from(fields);
        m.text("engine", self.engine.name());
        m.count("group_count", u64::from(groups));
        m.count("streams", streams);
        // spec/35 "Memory": what each group's replicated state holds.
        let per_group = gauges.into_iter().map(|(group, held)| {
            let mut line = serde_json::to_value(held).unwrap_or_default();
            line["group"] = group.into();
            line
        });
        m.detail("group_state_gauges", serde_json::Value::Array(per_group.collect()));
        m.count("node_id", self.engine.node_id());
        m.count("mutations_applied", mutations);
        m.count("appends_accepted", self.served.appends.load(std::sync::atomic::Ordering::Relaxed));
        m.count("reads", self.served.reads.load(std::sync::atomic::Ordering::Relaxed));
        m.count("raft_apply_ns", apply_ns);
        m.count("live_readers", self.live_readers());
        self.admission.metrics(&mut m);
        self.expiry.metrics(&mut m);
        m.text("process_incarnation", crate::process::process_incarnation());
        m
    }

    async fn usage(&self) -> Option<serde_json::Value> {
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
        report["staged_snapshot_parts"] = self.staged_parts_report().await;
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

impl<E: GroupEngine> NodeBackend<E> {
    /// For each group this node leads: its term and the bytes of staged
    /// parts per bucket (spec/35), from one listing of the parts tree at
    /// the time of the request (`counting_finished: false` when the listing
    /// failed). Without a cold store nothing can be staged: `[]`.
    async fn staged_parts_report(&self) -> serde_json::Value {
        let Some(cold) = &self.cold else { return serde_json::json!([]) };
        let groups = self.engine.group_count();
        let led: Vec<(u32, u64)> = (0..groups)
            .filter_map(|g| match self.engine.leadership(GroupId(g)) {
                Leadership::Local { term } => Some((g, term)),
                _ => None,
            })
            .collect();
        let listed = cold.staged_part_bytes().await;
        let mut bytes: std::collections::BTreeMap<u32, std::collections::BTreeMap<String, u64>> = Default::default();
        if let Ok(streams) = &listed {
            for (key, size) in streams {
                let group = group_of(key, groups).0;
                *bytes.entry(group).or_default().entry(key.bucket.as_str().to_string()).or_default() += size;
            }
        }
        let reports: Vec<serde_json::Value> = led
            .into_iter()
            .map(|(group, term)| {
                serde_json::json!({
                    "raft_group_id": group,
                    "term": term,
                    "counting_finished": listed.is_ok(),
                    "bytes": bytes.remove(&group).unwrap_or_default(),
                })
            })
            .collect();
        serde_json::Value::Array(reports)
    }
}
