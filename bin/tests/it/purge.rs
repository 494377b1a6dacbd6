//! Tenant offboarding (issue 21, spec/35 "Tenant offboarding"): a purge of
//! one tenant among three on three voters over a real S3-compatible store,
//! asked of a follower through `ursulactl purge-bucket`: the report's
//! proof fields, nothing left under the bucket's prefix, the other tenants'
//! bytes and objects unchanged, the fence (`404 BUCKET_ERASED`) after
//! snapshots and a restart of every voter, and a second purge that
//! removes nothing and proves the same.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::wait_ready;
use crate::cluster_leadership::{client, create, start_all, streams_in_distinct_groups};
use crate::ctl::{ctl, manifest, succeeded};
use crate::support::cluster::{Layout, Planes};
use crate::support::s3::S3Server;

const PATIENCE: Duration = Duration::from_secs(60);
const GROUPS: u32 = 4;
const TENANTS: [&str; 3] = ["tenant-a", "tenant-b", "tenant-c"];

/// Sends `method path` with `body` to whichever voter takes it (redirects
/// followed); returns the status and body.
async fn to_any(
    http: &reqwest::Client,
    urls: &[String],
    method: reqwest::Method,
    path: &str,
    body: &str,
) -> (u16, Value) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        for url in urls {
            let req = http.request(method.clone(), format!("{url}{path}")).header("content-type", "text/plain");
            let Ok(answer) = req.body(body.to_string()).send().await else { continue };
            let status = answer.status().as_u16();
            if status != 503 {
                let bytes = answer.bytes().await.unwrap_or_default();
                return (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null));
            }
        }
        assert!(Instant::now() < deadline, "no voter answered {method} {path} but 503");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn read(http: &reqwest::Client, url: &str, path: &str) -> (u16, String) {
    let answer = http.get(format!("{url}{path}?offset=-1")).send().await.expect("read");
    (answer.status().as_u16(), answer.text().await.unwrap_or_default())
}

/// Flushes `path`'s hot bytes to the cold tier on whichever voter leads it.
async fn flush(http: &reqwest::Client, layout: &Layout, path: &str) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        for i in 0..layout.voters() {
            let base = layout.admin_url(i);
            let Some(m) = crate::cluster_leadership::metrics(http, &base).await else { continue };
            let incarnation = m["process_incarnation"].as_str().unwrap_or_default().to_string();
            let url = format!("{base}/__ursula/flush-cold{path}");
            let answer = http.post(url).header("x-ursula-process-incarnation", incarnation).send().await;
            if answer.is_ok_and(|a| a.status() == 200) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "no voter flushed {path}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The S3 files of `bucket`'s erasure domain.
fn files_of(s3: &S3Server, bucket: &str) -> BTreeSet<PathBuf> {
    let domain = format!("/buckets/{bucket}/");
    s3.files().into_iter().filter(|f| f.to_string_lossy().contains(&domain)).collect()
}

fn check_proof(report: &Value) {
    assert_eq!(report["cold_gc_complete"], true, "{report}");
    assert_eq!(report["cold_gc_pending_entries"], 0, "{report}");
    assert_eq!(report["bucket_prefix_absent"], true, "{report}");
    assert!(report["cold_gc_error"].is_null(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_erases_one_tenant_everywhere_and_fences_it_across_restarts() {
    let s3 = S3Server::start().await;
    let mut layout = Layout::new(3, "purge", GROUPS, Planes::Shared);
    // Flushes only when forced, so each test stream has objects of its own.
    layout.sections = s3.cold_section("flush_interval = \"100ms\"\nflush_size = \"64MiB\"\ngc_grace = \"1s\"\n");
    let mut nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let post = reqwest::Method::POST;

    // Three tenants, a stream in each of three groups, flushed to S3 and then appended to.
    let mut streams = Vec::new();
    for tenant in TENANTS {
        for path in streams_in_distinct_groups(tenant, 3, GROUPS) {
            create(&http, &urls, &path).await;
            assert_eq!(to_any(&http, &urls, post.clone(), &path, &format!("cold {path};")).await.0, 204);
            flush(&http, &layout, &path).await;
            assert_eq!(to_any(&http, &urls, post.clone(), &path, "hot;").await.0, 204);
            streams.push(path);
        }
    }
    for tenant in TENANTS {
        assert!(!files_of(&s3, tenant).is_empty(), "{tenant} has cold objects under its prefix");
    }
    let mut kept = Vec::new();
    for path in streams.iter().filter(|p| !p.starts_with("/tenant-a/")) {
        kept.push((path.clone(), read(&http, &urls[0], path).await));
    }
    let kept_files: Vec<BTreeSet<PathBuf>> = TENANTS[1..].iter().map(|t| files_of(&s3, t)).collect();

    // A follower of most groups takes the purge for the whole cluster.
    let m = manifest(&layout, "cluster.json");
    let out = succeeded(&ctl(&["purge-bucket", "tenant-a", "--config", &m, "--node", "2"]).await, "purge-bucket");
    let report: Value = serde_json::from_str(out.trim()).expect("the report is JSON");
    assert_eq!(report["bucket"], "tenant-a");
    assert_eq!(report["removed_streams"], 3, "{report}");
    assert_eq!(report["groups_with_streams"].as_array().map(Vec::len), Some(3), "{report}");
    assert!(report["cold_gc_entries_reclaimed"].as_u64() >= Some(3), "{report}");
    check_proof(&report);
    assert!(files_of(&s3, "tenant-a").is_empty(), "nothing of tenant-a is left in S3");

    // The fence: creates and appends answer 404 BUCKET_ERASED, reads 404.
    let check_fenced = |label: &'static str| {
        let (http, urls, streams) = (http.clone(), urls.clone(), streams.clone());
        async move {
            let (status, body) = to_any(&http, &urls, reqwest::Method::PUT, "/tenant-a/new", "").await;
            assert_eq!((status, body["error"]["code"].as_str()), (404, Some("BUCKET_ERASED")), "{label}: {body}");
            let (status, body) = to_any(&http, &urls, reqwest::Method::POST, &streams[0], "more").await;
            assert_eq!((status, body["error"]["code"].as_str()), (404, Some("BUCKET_ERASED")), "{label}: {body}");
            for url in &urls {
                assert_eq!(read(&http, url, &streams[0]).await.0, 404, "{label}: a read of a purged stream");
            }
        }
    };
    check_fenced("after the purge").await;
    // The client plane has no purge route.
    let refused = http.delete(format!("{}/__ursula/purge/tenant-b", urls[0])).send().await.expect("client plane");
    assert_eq!(refused.status(), 404);

    // The other tenants are untouched, byte for byte and object for object.
    for (path, before) in &kept {
        assert_eq!(&read(&http, &urls[1], path).await, before, "{path}");
    }
    assert_eq!(TENANTS[1..].iter().map(|t| files_of(&s3, t)).collect::<Vec<_>>(), kept_files);

    // Snapshots of every group on every voter, then a restart of each: the fence holds.
    for i in 0..layout.voters() {
        for g in 0..GROUPS {
            let (status, body) =
                crate::ctl::admin(&http, &layout, i, post.clone(), &format!("/__ursula/raft/{g}/snapshot")).await;
            assert_eq!(status, 200, "snapshot of group {g} on voter {}: {body}", i + 1);
        }
    }
    #[allow(clippy::needless_range_loop)]
    for i in 0..layout.voters() {
        let node = nodes[i].take().expect("running");
        let (status, stderr) = tokio::task::block_in_place(|| node.terminate());
        assert!(status.success(), "voter {} after SIGTERM: {status}\n{stderr}", i + 1);
        nodes[i] = Some(layout.start(i));
        wait_ready(nodes[i].as_ref().expect("restarted")).await;
    }
    check_fenced("after snapshots and a restart of every voter").await;
    for (path, before) in &kept {
        assert_eq!(&read(&http, &urls[2], path).await, before, "{path} after the restarts");
    }

    // Again, on another voter: nothing to remove, the same proof.
    let (status, again) =
        crate::ctl::admin(&http, &layout, 2, reqwest::Method::DELETE, "/__ursula/purge/tenant-a").await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (again["removed_streams"].clone(), again["groups_with_streams"].clone()),
        (0.into(), serde_json::json!([]))
    );
    check_proof(&again);
}
