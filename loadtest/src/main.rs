//! `ursula-loadtest`: a benchmark harness for any Durable Streams server.
//!
//! ```text
//! ursula-loadtest SCENARIO --url URL [--path-template T] [flags] [--json OUT]
//! ursula-loadtest compare --url A --url B [--path-template TA --path-template TB] SCENARIO [flags]
//! ```
//!
//! See `loadtest/README.md`.

mod client;
mod fork_cost;
mod issuer;
mod otlp_sink;
mod relay;
mod report;
mod s3_server;
mod scenarios;
mod soak;
mod sse;
mod stats;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use client::Target;
use scenarios::{
    Ctx, Scenario, append::AppendArgs, catchup::CatchupArgs, fanout::FanoutArgs, flood::FloodArgs, many::ManyArgs,
};

const DEFAULT_TEMPLATE: &str = "/loadtest/{name}";

#[derive(Parser)]
#[command(name = "ursula-loadtest", version, about = "Benchmarks Durable Streams servers, alone or side by side")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// S streams, C concurrent writers, B-byte appends: throughput and latency.
    Append {
        #[command(flatten)]
        target: One,
        #[command(flatten)]
        args: AppendArgs,
    },
    /// R live SSE readers of one stream, one writer at a fixed rate: delivery latency, missed and duplicated events.
    SseFanout {
        #[command(flatten)]
        target: One,
        #[command(flatten)]
        args: FanoutArgs,
    },
    /// Write M MiB, read it back following Stream-Next-Offset: MiB/s.
    Catchup {
        #[command(flatten)]
        target: One,
        #[command(flatten)]
        args: CatchupArgs,
    },
    /// Create and write K streams: creates/s and resident memory per stream (with --server-pid).
    ManyStreams {
        #[command(flatten)]
        target: One,
        #[command(flatten)]
        args: ManyArgs,
    },
    /// An appender measured alone and during a flood of idle and slow connections: p99 in the flood / alone.
    ConnectionFlood {
        #[command(flatten)]
        target: One,
        #[command(flatten)]
        args: FloodArgs,
    },
    /// An S3-compatible server over a directory (s3s-fs), for cold-tier benchmarks.
    S3Server {
        /// Directory whose subdirectories are the buckets.
        #[arg(long)]
        dir: String,
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        #[arg(long, default_value = "bench")]
        access_key: String,
        #[arg(long, default_value = "bench-secret")]
        secret_key: String,
        /// Serve `GET` bodies as s3s-fs does (4 KiB reads) instead of one read per request.
        #[arg(long)]
        stock_gets: bool,
    },
    /// A minimal OAuth issuer (JWKS, metadata) that writes a token and a policy file, for an access-controlled gateway.
    Issuer {
        /// Where `token` and `policy.toml` are written.
        #[arg(long)]
        dir: String,
        /// The bucket the token's subject owns.
        #[arg(long, default_value = "bench")]
        bucket: String,
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
    },
    /// Producers of mixed-size records for a while (faults come from scripts/soak.sh), then every stream read back and checked: lost, duplicated, out of order.
    Soak {
        #[command(flatten)]
        args: soak::SoakArgs,
    },
    /// An OTLP/HTTP receiver that counts what it is sent, for benchmarks of telemetry export.
    OtlpSink {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
    },
    /// A TCP relay to one upstream that only moves bytes: beside a gateway, what an extra hop costs on this host.
    Relay {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        /// host:port of the server the relay forwards to.
        #[arg(long)]
        upstream: String,
    },
    /// Fork sources of growing size, one fork at a time: the time and resident memory of a fork (docs/forks.md).
    ForkCost {
        #[command(flatten)]
        args: fork_cost::ForkCostArgs,
    },
    /// Run a scenario against two or more servers in one run, interleaving rounds; ratios are to the first --url.
    Compare {
        #[command(flatten)]
        targets: Many,
        #[command(subcommand)]
        scenario: ScenarioCommand,
    },
}

#[derive(Subcommand)]
enum ScenarioCommand {
    Append(AppendArgs),
    SseFanout(FanoutArgs),
    Catchup(CatchupArgs),
    ManyStreams(ManyArgs),
}

#[derive(Args)]
struct Common {
    /// Rounds (default 1 alone, 3 in compare, 1 for many-streams).
    #[arg(long, global = true)]
    rounds: Option<u32>,
    /// Write the report as JSON to this file.
    #[arg(long, global = true)]
    json: Option<PathBuf>,
    /// Client runtime threads (the client shares the machine with the server).
    #[arg(long, default_value_t = 1, global = true)]
    client_threads: usize,
    /// Seconds of pause before each round, to let the previous one drain.
    #[arg(long, default_value_t = 1.0, global = true)]
    pause: f64,
    /// A header sent with every request to every target ("Name: value"),
    /// e.g. an `authorization` bearer token.
    #[arg(long = "header", global = true)]
    headers: Vec<String>,
}

/// One server.
#[derive(Args)]
struct One {
    /// Base URL of the server, e.g. http://127.0.0.1:4437.
    #[arg(long)]
    url: String,
    /// Stream path under the URL; `{name}` is replaced by the stream name.
    #[arg(long, default_value = DEFAULT_TEMPLATE)]
    path_template: String,
    /// Name of the server in the report.
    #[arg(long)]
    label: Option<String>,
    /// The server's process id, for CPU and resident memory from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    #[command(flatten)]
    common: Common,
}

/// Two or more servers; `--path-template`, `--label` and `--server-pid` pair
/// with the `--url`s in order (a single `--path-template` applies to all).
#[derive(Args)]
struct Many {
    /// Base URLs; the first is the one ratios are relative to.
    #[arg(long, required = true)]
    url: Vec<String>,
    #[arg(long)]
    path_template: Vec<String>,
    #[arg(long)]
    label: Vec<String>,
    /// Process ids, one per --url (0 for unknown).
    #[arg(long)]
    server_pid: Vec<u32>,
    #[command(flatten)]
    common: Common,
}

struct Plan {
    scenario: Scenario,
    targets: Vec<(String, String, String, Option<u32>)>,
    common: Common,
    comparing: bool,
}

fn plan(cli: Cli) -> anyhow::Result<Plan> {
    let one = |scenario: Scenario, t: One| Plan {
        scenario,
        targets: vec![(t.url.clone(), t.path_template, t.label.unwrap_or(t.url), t.server_pid)],
        common: t.common,
        comparing: false,
    };
    Ok(match cli.command {
        Command::Append { target, args } => one(Scenario::Append(args), target),
        Command::SseFanout { target, args } => one(Scenario::SseFanout(args), target),
        Command::Catchup { target, args } => one(Scenario::Catchup(args), target),
        Command::ManyStreams { target, args } => one(Scenario::ManyStreams(args), target),
        Command::ConnectionFlood { target, args } => one(Scenario::ConnectionFlood(args), target),
        Command::S3Server { .. }
        | Command::Issuer { .. }
        | Command::OtlpSink { .. }
        | Command::Relay { .. }
        | Command::Soak { .. }
        | Command::ForkCost { .. } => {
            anyhow::bail!("s3-server, issuer, otlp-sink, relay, soak and fork-cost run on their own")
        }
        Command::Compare { targets, scenario } => {
            let n = targets.url.len();
            anyhow::ensure!(n >= 2, "compare needs at least two --url");
            let pick = |v: &[String], what: &str, default: &dyn Fn(usize) -> String| -> anyhow::Result<Vec<String>> {
                match v.len() {
                    0 => Ok((0..n).map(default).collect()),
                    1 if what == "--path-template" => Ok(vec![v[0].clone(); n]),
                    l if l == n => Ok(v.to_vec()),
                    l => anyhow::bail!("{l} {what} for {n} --url"),
                }
            };
            let templates = pick(&targets.path_template, "--path-template", &|_| DEFAULT_TEMPLATE.to_string())?;
            let labels = pick(&targets.label, "--label", &|i| targets.url[i].clone())?;
            let pids: Vec<Option<u32>> = match targets.server_pid.len() {
                0 => vec![None; n],
                l if l == n => targets.server_pid.iter().map(|p| (*p != 0).then_some(*p)).collect(),
                l => anyhow::bail!("{l} --server-pid for {n} --url"),
            };
            let scenario = match scenario {
                ScenarioCommand::Append(a) => Scenario::Append(a),
                ScenarioCommand::SseFanout(a) => Scenario::SseFanout(a),
                ScenarioCommand::Catchup(a) => Scenario::Catchup(a),
                ScenarioCommand::ManyStreams(a) => Scenario::ManyStreams(a),
            };
            let list =
                (0..n).map(|i| (targets.url[i].clone(), templates[i].clone(), labels[i].clone(), pids[i])).collect();
            Plan { scenario, targets: list, common: targets.common, comparing: true }
        }
    })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Issuer { dir, bucket, listen } = &cli.command {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return runtime.block_on(issuer::serve(dir, bucket, listen));
    }
    if let Command::S3Server { dir, listen, access_key, secret_key, stock_gets } = &cli.command {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        return runtime.block_on(s3_server::serve(dir, listen, access_key, secret_key, *stock_gets));
    }
    if let Command::Soak { args } = &cli.command {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let held = runtime.block_on(soak::run(args.clone()))?;
        std::process::exit(if held { 0 } else { 1 });
    }
    if let Command::ForkCost { args } = &cli.command {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return runtime.block_on(fork_cost::run(args.clone()));
    }
    if let Command::OtlpSink { listen } = &cli.command {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return runtime.block_on(otlp_sink::serve(listen));
    }
    if let Command::Relay { listen, upstream } = &cli.command {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return runtime.block_on(relay::serve(listen, upstream));
    }
    let plan = plan(cli)?;
    client::set_extra_headers(&plan.common.headers)?;
    let threads = plan.common.client_threads.max(1);
    let runtime = if threads == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_all().build()?
    };
    runtime.block_on(run(plan))
}

async fn run(plan: Plan) -> anyhow::Result<()> {
    let mut targets = Vec::new();
    for (url, template, label, pid) in &plan.targets {
        targets.push(Target::resolve(url, template, label, *pid).await?);
    }
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let run_id = format!("lt{:x}", unix & 0xff_ffff);
    let ctx = Ctx { run_id: run_id.clone() };
    let rounds = plan.common.rounds.unwrap_or_else(|| plan.scenario.default_rounds(plan.comparing)).max(1);
    let pause = Duration::from_secs_f64(plan.common.pause.max(0.0));
    let reports = scenarios::run(&plan.scenario, &ctx, &targets, rounds, pause).await?;
    let title = format!(
        "{}  rounds={rounds}{}",
        plan.scenario.describe(),
        if targets.len() > 1 { " (interleaved; ratios are to the first server)" } else { "" }
    );
    println!("{}", report::table(&title, &reports));
    if let Some(path) = &plan.common.json {
        let value = report::json_report(plan.scenario.name(), plan.scenario.params(), rounds, &run_id, &reports);
        std::fs::write(path, serde_json::to_string_pretty(&value)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
