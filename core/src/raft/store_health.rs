//! The snapshot-store health gate (spec/07, "Cold storage" and the
//! snapshot driver's paragraph). Each tick probes the store and reads the
//! node's cold writes. After `storage.cold.s3.unhealthy_ticks` bad ticks
//! with no good one between, the node stops campaigning, holds routine
//! snapshots back and hands its leaderships to peers that may lead, at
//! most four per tick, the groups with the most unflushed bytes first;
//! after `heal_ticks` good ticks in a row it may lead again. Hot reads and
//! appends go on wherever the leaders are.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::engine::RaftEngine;
use crate::cold::s3::S3Health;
use crate::cold::{Cold, ColdWrites};

/// Leaderships a shedding node hands off per tick.
const HANDOFFS_PER_TICK: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    Good,
    Bad,
    /// Writes both failed and succeeded: neither ends a bad streak nor adds to it.
    Neutral,
}

impl Tick {
    fn name(self) -> &'static str {
        match self {
            Tick::Good => "good",
            Tick::Bad => "bad",
            Tick::Neutral => "neutral",
        }
    }
}

/// One tick's verdict: the probe, and the cold writes since the last tick
/// (`before`) and within `window` (how long a failed write weighs).
pub fn classify(probe_ok: bool, before: &ColdWrites, now: &ColdWrites, window: Duration) -> Tick {
    if !probe_ok {
        return Tick::Bad;
    }
    if now.failures > before.failures && now.uploads > before.uploads {
        return Tick::Neutral;
    }
    let failing = now
        .last_failed
        .is_some_and(|failed| now.now.saturating_sub(failed) <= window && now.last_ok.is_none_or(|ok| ok < failed));
    if failing { Tick::Bad } else { Tick::Good }
}

/// The gate's streaks and whether the node sheds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthGate {
    unhealthy_ticks: u32,
    heal_ticks: u32,
    bad_streak: u32,
    good_streak: u32,
    shedding: bool,
}

impl HealthGate {
    pub fn new(unhealthy_ticks: u32, heal_ticks: u32) -> HealthGate {
        HealthGate { unhealthy_ticks, heal_ticks, bad_streak: 0, good_streak: 0, shedding: false }
    }

    /// Takes one tick; returns whether the node sheds after it.
    pub fn tick(&mut self, tick: Tick) -> bool {
        match tick {
            Tick::Good => {
                self.bad_streak = 0;
                self.good_streak += 1;
                if self.shedding && self.good_streak >= self.heal_ticks {
                    self.shedding = false;
                }
            }
            Tick::Bad => {
                self.good_streak = 0;
                self.bad_streak += 1;
                if self.bad_streak >= self.unhealthy_ticks {
                    self.shedding = true;
                }
            }
            Tick::Neutral => self.good_streak = 0,
        }
        self.shedding
    }
}

/// The gate of one node, with what it last saw.
pub struct StoreHealth {
    gate: Mutex<HealthGate>,
    last: Mutex<(Option<Tick>, Option<String>)>,
    /// The last tick was bad: routine snapshots wait.
    bad: AtomicBool,
    handoffs: AtomicU64,
}

impl StoreHealth {
    pub fn new(settings: S3Health) -> StoreHealth {
        StoreHealth {
            gate: Mutex::new(HealthGate::new(settings.unhealthy_ticks, settings.heal_ticks)),
            last: Mutex::new((None, None)),
            bad: AtomicBool::new(false),
            handoffs: AtomicU64::new(0),
        }
    }

    pub fn holds_snapshots(&self) -> bool {
        self.bad.load(Ordering::SeqCst)
    }

    fn take(&self, tick: Tick, error: Option<String>) -> bool {
        self.bad.store(tick == Tick::Bad, Ordering::SeqCst);
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = (Some(tick), error);
        self.gate.lock().unwrap_or_else(|p| p.into_inner()).tick(tick)
    }

    pub fn report(&self) -> Value {
        let gate = *self.gate.lock().unwrap_or_else(|p| p.into_inner());
        let (tick, error) = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        json!({
            "gate": if gate.shedding { "closed" } else { "open" },
            "last_tick": tick.map(Tick::name),
            "last_probe_error": error,
            "bad_streak": gate.bad_streak,
            "good_streak": gate.good_streak,
            "handoffs": self.handoffs.load(Ordering::Relaxed),
        })
    }
}

/// Runs the gate every `every` while the node has an S3 snapshot store.
pub async fn run(engine: Arc<RaftEngine>, cold: Arc<Cold>, every: Duration, settings: S3Health, window: Duration) {
    let (Some(objects), Some(health)) = (engine.objects.clone(), engine.store_health.clone()) else { return };
    let mut before = cold.writes();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (probe_ok, error) = match tokio::time::timeout(settings.probe_timeout, objects.probe()).await {
            Ok(Ok(())) => (true, None),
            Ok(Err(e)) => (false, Some(e.to_string())),
            Err(_) => (false, Some(format!("the probe missed its {:?} deadline", settings.probe_timeout))),
        };
        let now = cold.writes();
        let verdict = classify(probe_ok, &before, &now, window);
        before = now;
        let shedding = health.take(verdict, error.clone());
        if shedding != engine.shed.store.swap(shedding, Ordering::SeqCst) {
            if shedding {
                tracing::warn!(
                    error = error.as_deref().unwrap_or("cold writes fail"),
                    "the snapshot store is unhealthy: this node stops campaigning and hands its leaderships off"
                );
            } else {
                tracing::info!("the snapshot store is healthy again: this node may lead");
            }
            engine.elect(engine.shed.may_lead());
        }
        if shedding {
            let moved = engine.shed_for_store(&cold, HANDOFFS_PER_TICK).await;
            health.handoffs.fetch_add(moved as u64, Ordering::Relaxed);
        }
    }
}

impl RaftEngine {
    /// Hands up to `max` of this node's leaderships to willing caught-up
    /// peers, the groups with the most unflushed bytes first.
    async fn shed_for_store(&self, cold: &Cold, max: usize) -> usize {
        let leaders = self.leaders();
        if !leaders.contains(&Some(self.node_id)) {
            return 0;
        }
        let willing = self.willing_peers(self.peer_timeout).await;
        let caught_up: Vec<Vec<u64>> = self.groups.iter().map(|g| self.caught_up(g)).collect();
        let mut order: Vec<usize> = (0..leaders.len()).collect();
        order.sort_by_key(|g| std::cmp::Reverse(cold.hot_bytes(*g as u32)));
        let moves = super::leadership::plan_in_order(&order, &leaders, self.node_id, true, &willing, &caught_up, max);
        self.trigger_all(moves).await
    }

    pub(super) fn store_health_metrics(&self, m: &mut Map<String, Value>) {
        if let Some(health) = &self.store_health {
            m.insert("snapshot_store_health".into(), health.report());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writes(uploads: u64, failures: u64, last_ok: Option<u64>, last_failed: Option<u64>, now: u64) -> ColdWrites {
        ColdWrites {
            uploads,
            failures,
            last_ok: last_ok.map(Duration::from_secs),
            last_failed: last_failed.map(Duration::from_secs),
            now: Duration::from_secs(now),
        }
    }

    #[test]
    fn a_tick_is_bad_on_a_failed_probe_or_a_recent_failed_write_with_no_success_since() {
        let window = Duration::from_secs(55);
        let quiet = writes(5, 0, Some(10), None, 100);
        assert_eq!(classify(true, &quiet, &quiet, window), Tick::Good);
        assert_eq!(classify(false, &quiet, &quiet, window), Tick::Bad, "the probe failed");
        let failed = writes(5, 1, Some(10), Some(90), 100);
        assert_eq!(classify(true, &quiet, &failed, window), Tick::Bad, "a write failed, none succeeded since");
        let later = writes(5, 1, Some(10), Some(90), 200);
        assert_eq!(classify(true, &failed, &later, window), Tick::Good, "the failure left the window");
        let mixed = writes(6, 2, Some(99), Some(98), 100);
        assert_eq!(classify(true, &failed, &mixed, window), Tick::Neutral, "failed and succeeded in one tick");
        let healed = writes(7, 2, Some(101), Some(98), 102);
        assert_eq!(classify(true, &mixed, &healed, window), Tick::Good, "a success after the last failure");
        assert_eq!(classify(false, &mixed, &healed, window), Tick::Bad, "the probe still decides");
    }

    #[test]
    fn the_gate_sheds_after_the_bad_streak_and_leads_again_after_the_good_one() {
        use Tick::*;
        let mut gate = HealthGate::new(3, 2);
        // (tick, shedding after it)
        let script = [
            (Bad, false),
            (Bad, false),
            (Good, false),
            (Bad, false),
            (Neutral, false),
            (Bad, false),
            (Bad, true),
            (Good, true),
            (Neutral, true),
            (Good, true),
            (Good, false),
            (Bad, false),
        ];
        for (i, (tick, shedding)) in script.into_iter().enumerate() {
            assert_eq!(gate.tick(tick), shedding, "step {i}: {tick:?}");
        }
    }
}
