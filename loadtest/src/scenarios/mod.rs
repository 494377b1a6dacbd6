//! The scenarios. Each has a setup (once per server, before any round) and a
//! round (run once per server per round, interleaved by [`run`]), both bounded
//! in time and request count, and turns its merged [`Sample`] into figures.

pub mod append;
pub mod catchup;
pub mod fanout;
pub mod flood;
pub mod many;

use std::time::Duration;

use serde_json::Value;

use crate::client::Target;
use crate::report::{Better, Figure, TargetReport};
use crate::stats::{Latency, Sample, proc_cpu_seconds, rate};

/// What every scenario knows about the run.
pub struct Ctx {
    /// Prefix of every stream name, so runs against one server never collide.
    pub run_id: String,
}

impl Ctx {
    pub fn name(&self, parts: std::fmt::Arguments<'_>) -> String {
        format!("{}-{}", self.run_id, parts)
    }
}

#[derive(Clone, Debug)]
pub enum Scenario {
    Append(append::AppendArgs),
    SseFanout(fanout::FanoutArgs),
    Catchup(catchup::CatchupArgs),
    ManyStreams(many::ManyArgs),
    ConnectionFlood(flood::FloodArgs),
}

/// Per-server state carried from setup into the rounds.
pub enum State {
    Append(append::State),
    Catchup(catchup::State),
    None,
}

impl Scenario {
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Append(_) => "append",
            Scenario::SseFanout(_) => "sse-fanout",
            Scenario::Catchup(_) => "catchup",
            Scenario::ManyStreams(_) => "many-streams",
            Scenario::ConnectionFlood(_) => "connection-flood",
        }
    }

    /// The parameters, for the report.
    pub fn params(&self) -> Value {
        match self {
            Scenario::Append(a) => a.params(),
            Scenario::SseFanout(a) => a.params(),
            Scenario::Catchup(a) => a.params(),
            Scenario::ManyStreams(a) => a.params(),
            Scenario::ConnectionFlood(a) => a.params(),
        }
    }

    /// A one-line description for the table's title.
    pub fn describe(&self) -> String {
        let params = self.params();
        let parts: Vec<String> = params
            .as_object()
            .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.to_string().trim_matches('"'))).collect())
            .unwrap_or_default();
        format!("{}: {}", self.name(), parts.join(" "))
    }

    /// What one `ops` of the scenario is, for the CPU-per-op figure.
    fn op(&self) -> &'static str {
        match self {
            Scenario::Append(_) | Scenario::ConnectionFlood(_) => "append",
            Scenario::SseFanout(_) => "delivered event",
            Scenario::Catchup(_) => "MiB read",
            Scenario::ManyStreams(_) => "stream",
        }
    }

    /// How many rounds a run has when none is asked for.
    pub fn default_rounds(&self, comparing: bool) -> u32 {
        match self {
            // Memory is measured against the empty server: one round only.
            Scenario::ManyStreams(_) => 1,
            _ if comparing => 3,
            _ => 1,
        }
    }

    async fn setup(&self, ctx: &Ctx, t: &Target, sample: &mut Sample) -> anyhow::Result<State> {
        match self {
            Scenario::Append(a) => Ok(State::Append(append::setup(a, ctx, t).await?)),
            Scenario::ConnectionFlood(a) => Ok(State::Append(flood::setup(a, ctx, t).await?)),
            Scenario::Catchup(a) => Ok(State::Catchup(catchup::setup(a, ctx, t, sample).await?)),
            Scenario::ManyStreams(_) => {
                many::setup(t, sample);
                Ok(State::None)
            }
            Scenario::SseFanout(_) => Ok(State::None),
        }
    }

    async fn round(&self, ctx: &Ctx, t: &Target, state: &State, round: u32) -> anyhow::Result<Sample> {
        match (self, state) {
            (Scenario::Append(a), State::Append(s)) => append::round(a, t, s, round).await,
            (Scenario::ConnectionFlood(a), State::Append(s)) => flood::round(a, t, s, round).await,
            (Scenario::SseFanout(a), _) => fanout::round(a, ctx, t, round).await,
            (Scenario::Catchup(a), State::Catchup(s)) => catchup::round(a, t, s).await,
            (Scenario::ManyStreams(a), _) => many::round(a, ctx, t, round).await,
            _ => anyhow::bail!("scenario state mismatch"),
        }
    }

    /// The figures of a (merged) sample: the scenario's own, then the CPU
    /// figures every scenario shares.
    pub fn figures(&self, s: &Sample) -> Vec<Figure> {
        let mut f = match self {
            Scenario::Append(_) => append::figures(s),
            Scenario::SseFanout(_) => fanout::figures(s),
            Scenario::Catchup(_) => catchup::figures(s),
            Scenario::ManyStreams(_) => many::figures(s),
            Scenario::ConnectionFlood(_) => flood::figures(s),
        };
        f.extend(error_figures(s));
        f.extend(cpu_figures(s, self.op()));
        f
    }
}

/// The error count, and one figure per error status or kind.
fn error_figures(s: &Sample) -> Vec<Figure> {
    let mut f = vec![Figure::new("errors", "errors", "", Some(s.error_total()), Better::Lower)];
    for (kind, n) in s.errors() {
        f.push(Figure::new(&format!("err:{kind}"), &format!("errors {kind}"), "", Some(n), Better::Lower));
    }
    f
}

/// Server and client CPU over the measured rounds: utilisation, and the
/// server's CPU time per operation (the scenario's `ops` counter).
fn cpu_figures(s: &Sample, op: &str) -> Vec<Figure> {
    let elapsed = s.counter("elapsed_s");
    let mut f = Vec::new();
    if s.counters.contains_key("server_cpu_s") {
        let cpu = s.counter("server_cpu_s");
        f.push(Figure::new("server_cpu_pct", "server CPU", "% of a core", rate(cpu * 100.0, elapsed), Better::Neither));
        let ops = s.counter("ops");
        let per_op = if ops > 0.0 { Some(cpu * 1e6 / ops) } else { None };
        f.push(Figure::new("server_cpu_us_per_op", &format!("server CPU per {op}"), "us", per_op, Better::Lower));
    }
    f.push(Figure::new(
        "client_cpu_pct",
        "client CPU",
        "% of a core",
        rate(s.counter("client_cpu_s") * 100.0, elapsed),
        Better::Neither,
    ));
    f
}

/// The standard latency figures of a histogram, in milliseconds.
pub fn latency_figures(h: Option<&Latency>, prefix: &str, label: &str, quantiles: &[(f64, &str)]) -> Vec<Figure> {
    let mut f = Vec::new();
    for (q, name) in quantiles {
        f.push(Figure::new(
            &format!("{prefix}_{name}_ms"),
            &format!("{label} {name}"),
            "ms",
            h.and_then(|h| h.quantile_ms(*q)),
            Better::Lower,
        ));
    }
    f.push(Figure::new(
        &format!("{prefix}_max_ms"),
        &format!("{label} max"),
        "ms",
        h.and_then(|h| h.max_ms()),
        Better::Lower,
    ));
    f
}

/// Runs `scenario` against every target: setup for each, then `rounds`
/// rounds, each visiting every target in turn (alternating the order every
/// round, so neither server always goes first), so slow drifts of a shared
/// machine hit all servers alike.
pub async fn run(
    scenario: &Scenario,
    ctx: &Ctx,
    targets: &[Target],
    rounds: u32,
    pause: Duration,
) -> anyhow::Result<Vec<TargetReport>> {
    let mut states = Vec::new();
    let mut totals = Vec::new();
    let mut setups = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let mut setup = Sample::default();
        eprintln!("[{}] {}: setup", scenario.name(), t.label);
        // Stream names per target: two targets may front the same cluster.
        let own = Ctx { run_id: format!("{}-t{i}", ctx.run_id) };
        let state = scenario.setup(&own, t, &mut setup).await?;
        states.push(state);
        totals.push(setup.clone());
        setups.push(setup);
    }
    let mut per_round: Vec<Vec<Sample>> = targets.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        let order: Vec<usize> =
            if r % 2 == 0 { (0..targets.len()).collect() } else { (0..targets.len()).rev().collect() };
        for i in order {
            let t = &targets[i];
            tokio::time::sleep(pause).await;
            let (client0, server0) = (proc_cpu_seconds(None), t.pid.and_then(|p| proc_cpu_seconds(Some(p))));
            let mut s = scenario.round(ctx, t, &states[i], r).await?;
            if let (Some(a), Some(b)) = (client0, proc_cpu_seconds(None)) {
                s.add("client_cpu_s", b - a);
            }
            if let (Some(a), Some(b)) = (server0, t.pid.and_then(|p| proc_cpu_seconds(Some(p)))) {
                s.add("server_cpu_s", b - a);
            }
            let mut with_setup = setups[i].clone();
            with_setup.merge(&s);
            let head = scenario.figures(&with_setup).into_iter().next();
            if let Some(h) = head {
                eprintln!(
                    "[{}] round {}/{} {}: {} {} {}",
                    scenario.name(),
                    r + 1,
                    rounds,
                    t.label,
                    h.label,
                    crate::report::fmt_value(h.value),
                    h.unit
                );
            }
            totals[i].merge(&s);
            per_round[i].push(s);
        }
    }
    Ok(targets
        .iter()
        .zip(totals)
        .zip(per_round.iter().zip(&setups))
        .map(|((t, total), (rounds, setup))| TargetReport {
            target: t.clone(),
            figures: scenario.figures(&total),
            // Each round's figures include what setup measured (baselines).
            round_figures: rounds
                .iter()
                .map(|s| {
                    let mut with_setup = setup.clone();
                    with_setup.merge(s);
                    scenario.figures(&with_setup)
                })
                .collect(),
            total,
        })
        .collect())
}
