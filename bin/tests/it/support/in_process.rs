//! A node inside the test process, as mini-redis tests its server: the
//! development node (in-memory engine, the node's HTTP surface) on a
//! `127.0.0.1:0` listener, on a runtime of its own thread, with its time
//! held still by a `ManualClock` that tests move on instead of sleeping.
//! Real processes stay for what needs them (durability, clusters,
//! gateways, the cold tier, conformance).

use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tokio::sync::oneshot;
use ursula_core::clock::ManualClock;
use ursula_core::config::{self, CliOverrides};

pub struct InProcess {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    clock: Arc<ManualClock>,
}

impl InProcess {
    /// Starts a development node; `json_reads` as `--json-reads` takes it.
    /// Returns the node and its bound address.
    pub fn start(json_reads: Option<&str>) -> (InProcess, String) {
        InProcess::start_with_config("", json_reads)
    }

    /// Starts a node whose config file reads `text` (empty: the development node).
    pub fn start_with_config(text: &str, json_reads: Option<&str>) -> (InProcess, String) {
        // The `dev` preset keeps the in-memory engine whatever the text sets.
        let cli = CliOverrides {
            json_reads: json_reads.map(str::to_owned),
            preset: Some("dev".into()),
            ..CliOverrides::default()
        };
        let mut config = config::from_text(text, &cli).expect("the node's settings");
        // Many nodes run at once here: each admin plane on a port of its own.
        config.admin_listen = "127.0.0.1:0".parse().expect("an address");
        let clock = Arc::new(ManualClock::stopped_now());
        let node_clock = clock.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let (bound, address) = std::sync::mpsc::channel();
        let thread = thread::Builder::new()
            .name("in-process-node".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding 127.0.0.1:0");
                    let _ = bound.send(listener.local_addr().expect("a bound address").to_string());
                    let shutdown = async {
                        let _ = stopped.await;
                    };
                    if let Err(e) = ursula_core::node::run_with_clock(&config, listener, node_clock, shutdown).await {
                        panic!("the in-process node failed: {e:#}");
                    }
                });
            })
            .expect("spawning the node's thread");
        let addr = address.recv_timeout(Duration::from_secs(30)).expect("the in-process node bound its listener");
        (InProcess { stop: Some(stop), thread: Some(thread), clock }, addr)
    }

    /// Moves the node's time on by `by`.
    pub fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
