//! deploy/ (issue 22): the example configs of spec/06 "Without Kubernetes"
//! (`deploy/configs/voter.toml` and `cluster-manifest.json`) start a
//! three-voter cluster on one host with only addresses and paths
//! substituted, plus what a host needs that the example leaves out (each
//! node's own admin port, and the test's S3-compatible store's endpoint and
//! keys), and 16 Raft groups instead of 256: three debug-built voters of
//! 256 groups each, on the two shared cores of a test host, left groups
//! leaderless for minutes (768 Raft groups heartbeating on two cores);
//! `ursulactl wait-ready` with the example manifest passes. And the
//! config checks an operator runs before a start: `ursula config check`
//! accepts the example and refuses a broken file with the start's one line,
//! `ursula gateway --check` likewise for a gateway's flags.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cluster_leadership::{client, create};
use crate::ctl::{ctl, succeeded};
use crate::support::Node;
use crate::support::cluster::free_port;
use crate::support::s3::{ACCESS_KEY, S3Server, SECRET_KEY};

/// The example's 256 groups are too many for three debug voters on two cores.
const GROUPS: u32 = 16;

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/configs").join(file)
}

fn read(file: &str) -> String {
    std::fs::read_to_string(deploy(file)).expect("a file of deploy/configs")
}

/// One host's stand-ins for the example's addresses.
struct Host {
    client: Vec<u16>,
    cluster: Vec<u16>,
}

impl Host {
    /// `text` with node N's addresses (`10.0.0.N:4437`, `10.0.0.N:4439`)
    /// on this host's ports.
    fn peers(&self, mut text: String) -> String {
        for n in 0..3 {
            text = text
                .replace(&format!("10.0.0.{}:4437", n + 1), &format!("127.0.0.1:{}", self.client[n]))
                .replace(&format!("10.0.0.{}:4439", n + 1), &format!("127.0.0.1:{}", self.cluster[n]))
                .replace(&format!("\"10.0.0.{}\"", n + 1), "\"127.0.0.1\"");
        }
        text
    }
}

fn ursula(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ursula")).args(args).output().expect("running ursula")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_configs_of_spec_06_start_a_three_voter_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s3 = S3Server::start().await;
    // The example's bucket, in the test's store.
    std::fs::create_dir(s3.dir.path().join("my-ursula-bucket")).expect("the example's bucket");
    let host = Host { client: (0..3).map(|_| free_port()).collect(), cluster: (0..3).map(|_| free_port()).collect() };
    let example = read("voter.toml");
    let mut nodes = Vec::new();
    for i in 0..3 {
        let text = host
            .peers(example.clone())
            .replace("0.0.0.0:4437", &format!("127.0.0.1:{}", host.client[i]))
            .replace("0.0.0.0:4439", &format!("127.0.0.1:{}", host.cluster[i]))
            .replace("/var/lib/ursula", &dir.path().join(format!("n{}", i + 1)).display().to_string())
            .replace("group_count = 256", &format!("group_count = {GROUPS}"))
            .replace("[server]\n", &format!("[server]\nadmin_listen = \"127.0.0.1:{}\"\n", free_port()))
            .replace(
                "region = \"us-east-1\"\n",
                &format!(
                    "region = \"us-east-1\"\nendpoint = \"http://{}\"\naccess_key_id = {ACCESS_KEY:?}\n\
                     secret_access_key = {SECRET_KEY:?}\n",
                    s3.addr
                ),
            );
        let path = dir.path().join(format!("n{}.toml", i + 1));
        std::fs::write(&path, text).expect("a node's config");
        // As the spec starts it: `ursula --config FILE --node-id N`.
        let args = ["--config".to_string(), path.display().to_string(), "--node-id".into(), (i + 1).to_string()];
        nodes.push(Node::spawn(&args, None));
    }
    let manifest = dir.path().join("cluster-manifest.json");
    std::fs::write(&manifest, host.peers(read("cluster-manifest.json"))).expect("the manifest");
    let manifest = manifest.display().to_string();
    let ready =
        ctl(&["wait-ready", "--config", &manifest, "--expected-groups", &GROUPS.to_string(), "--timeout-secs", "120"])
            .await;
    succeeded(&ready, "wait-ready");

    // It serves: a write through one voter, read back through another.
    let (http, urls) = (client(), nodes.iter().map(|n| n.base().to_string()).collect::<Vec<_>>());
    create(&http, &urls, "/deploy-check/s").await;
    let appended = http
        .post(format!("{}/deploy-check/s", urls[0]))
        .header("content-type", "text/plain")
        .body("from the example config")
        .send()
        .await
        .expect("append");
    assert_eq!(appended.status(), 204);
    let read_back = http.get(format!("{}/deploy-check/s?offset=-1", urls[2])).send().await.expect("read");
    assert_eq!(read_back.headers()["ursula-cluster-id"], "prod-us-east-1");
    assert_eq!(read_back.text().await.expect("body"), "from the example config");
    let status = succeeded(&ctl(&["status", "--config", &manifest, "--json"]).await, "status");
    assert!(status.contains("\"raft_group_id\"") || status.contains("groups"), "{status}");
}

#[test]
fn config_check_accepts_the_example_and_refuses_a_broken_file_with_one_line() {
    let example = deploy("voter.toml").display().to_string();
    let out = ursula(&["config", "check", "--node-id", "1", &example]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("prod-us-east-1") && stdout.contains("group_count: 256"), "{stdout}");

    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, read("voter.toml").replace("group_count = 256", "group_count = \"many\"")).expect("file");
    let out = ursula(&["config", "check", "--node-id", "1", &broken.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    assert!(stderr.starts_with("ursula: ") && stderr.contains("raft.group_count"), "{stderr}");
    // Without the node id a shared file leaves out, a start would refuse too.
    let out = ursula(&["config", "check", &example]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("node_id"), "{out:?}");

    let out = ursula(&["gateway", "--check", "--upstream", "http://10.0.0.1:4437", "--listen", "0.0.0.0:4437"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("listen = 0.0.0.0:4437"), "{out:?}");
    let out = ursula(&["gateway", "--check", "--upstream", "ftp://10.0.0.1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // The upstream timeouts the release notes name (the chart passes the first).
    let timeouts = ["--upstream-tcp-user-timeout", "3s", "--response-header-timeout", "45s", "--connect-timeout", "1s"];
    let out = ursula(&[&["gateway", "--check", "--upstream", "http://10.0.0.1:4437"][..], &timeouts[..]].concat());
    assert!(out.status.success(), "{out:?}");
    let out =
        ursula(&["gateway", "--check", "--upstream", "http://10.0.0.1:4437", "--upstream-tcp-user-timeout", "500ms"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1s"), "{out:?}");
}

/// spec/35: past `runtime.node_memory_abort_cap_size` a node aborts, as an
/// OOM kill would, rather than answering anything.
#[cfg(target_os = "linux")]
#[test]
fn a_node_past_its_memory_abort_cap_aborts() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("capped.toml");
    let text = "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"127.0.0.1:0\"\n[runtime]\nnode_memory_abort_cap_size = \"1MiB\"\n";
    std::fs::write(&config, text).expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ursula"))
        .args(["server", "--config", &config.display().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ursula starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the node kept running past its cap");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.signal(), Some(6), "SIGABRT: {status:?}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr).expect("stderr");
    assert!(stderr.contains("runtime.node_memory_abort_cap_size"), "{stderr}");
}

/// spec/07: without `--config` a node searches `./ursula.toml`,
/// `/etc/ursula/ursula.toml`, then the user's config paths.
#[tokio::test]
async fn a_node_finds_its_config_in_the_users_config_directory() {
    let home = tempfile::tempdir().expect("home");
    let elsewhere = tempfile::tempdir().expect("a directory without ursula.toml");
    let dir = home.path().join(".config").join("ursula");
    std::fs::create_dir_all(&dir).expect("config dir");
    let wal = home.path().join("wal");
    // An ephemeral admin port: the default may be free (then its line comes
    // first) or taken by another test's node.
    let config =
        format!("[server]\nadmin_listen = \"127.0.0.1:0\"\n[raft]\ngroup_count = 3\n[raft.wal]\npath = {wal:?}\n");
    std::fs::write(dir.join("ursula.toml"), config).expect("config");
    let mut command = Command::new(env!("CARGO_BIN_EXE_ursula"));
    command
        .args(["server", "--listen", "127.0.0.1:0"])
        .current_dir(elsewhere.path())
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().expect("ursula starts");
    let stdout = child.stdout.take().expect("stdout");
    // Every line up to the listening line: the admin plane's comes first.
    let printed = tokio::task::spawn_blocking(move || {
        let mut lines = String::new();
        let mut reader = std::io::BufReader::new(stdout);
        while std::io::BufRead::read_line(&mut reader, &mut lines)? > 0 && !lines.contains("ursula listening on") {}
        std::io::Result::Ok(lines)
    })
    .await
    .expect("read")
    .expect("the start lines");
    let _ = child.kill();
    let _ = child.wait();
    let expected = dir.join("ursula.toml");
    assert!(printed.contains(&format!("config {}", expected.display())), "{printed}");
    assert!(printed.contains("durable node"), "{printed}");
}
