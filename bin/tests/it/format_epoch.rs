//! Format epoch 5 (spec/35 "Upgrading", spec/38 "Startup failures"): a
//! node marks its WAL directory and its object-storage namespace once every
//! startup check passed, and refuses a directory or a namespace of another
//! epoch, or one holding data without a marker, before it writes anything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::durability::args_for;
use crate::support::s3::{BUCKET, S3Server};
use crate::support::{Node, run_to_exit};

const TEXT: &str = "text/plain";
const S: &str = "/epoch/s";

/// Every file under `dir` with its length.
fn tree(dir: &Path) -> BTreeMap<PathBuf, u64> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, u64>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.insert(path.clone(), entry.metadata().map_or(0, |m| m.len()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &mut out);
    out
}

/// Runs the node to its exit; it must refuse to start with `message`, and
/// change nothing under `dir`.
fn refused(args: &[String], dir: &Path, message: &str) {
    let before = tree(dir);
    let (status, stderr) = run_to_exit(args);
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains(message), "expected {message:?} in: {stderr}");
    assert_eq!(tree(dir), before, "a refused start writes nothing");
}

#[tokio::test]
async fn a_wal_directory_of_another_epoch_or_without_a_marker_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args = args_for(dir.path(), "");
    let marker = dir.path().join("wal/raft-log/FORMAT_EPOCH");
    let node = Node::spawn(&args, None);
    node.create(S, TEXT).await;
    node.append(S, TEXT, "kept").await;
    assert_eq!(std::fs::read_to_string(&marker).expect("the marker"), "5\n");
    let (status, stderr) = node.terminate();
    assert!(status.success(), "{stderr}");

    let wal = dir.path().join("wal");
    std::fs::write(&marker, "4\n").expect("an older epoch");
    refused(&args, &wal, "is format epoch 4");
    std::fs::remove_file(&marker).expect("no marker");
    refused(&args, &wal, "holds data without a format marker");

    std::fs::write(&marker, "5\n").expect("this epoch");
    let node = Node::spawn(&args, None);
    let read = node.get(&format!("{S}?offset=-1")).send().await;
    assert_eq!(read.status, 200);
    assert_eq!(read.text(), "kept");
}

/// Waits until the S3 server holds `key` with `content` (it does once the
/// node serves).
async fn object_becomes(s3: &S3Server, key: &str, content: &str) {
    let path = s3.dir.path().join(BUCKET).join(key);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&path).ok().as_deref() != Some(content) {
        assert!(Instant::now() < deadline, "{key} never became {content:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// Multi-threaded: the S3 server runs in this process, while `run_to_exit` blocks a thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_namespace_of_another_epoch_or_without_a_marker_is_refused() {
    let mut s3 = S3Server::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let args = args_for(dir.path(), &s3.cold_section(""));
    // A fresh namespace (`root = "it"`) is marked once the node started.
    let node = Node::spawn(&args, None);
    object_becomes(&s3, "it/URSULA_FORMAT_EPOCH", "5\n").await;
    let (status, stderr) = node.terminate();
    assert!(status.success(), "{stderr}");

    // As an older release left it. The test server keeps each object's
    // checksum beside it (the marker is its only object): that goes, or its
    // answers would fail the client's check.
    std::fs::write(s3.dir.path().join(BUCKET).join("it/URSULA_FORMAT_EPOCH"), "4\n").expect("an older epoch");
    for entry in std::fs::read_dir(s3.dir.path()).expect("the server's files").flatten() {
        if entry.file_name().to_string_lossy().ends_with(".internal.json") {
            std::fs::remove_file(entry.path()).expect("the stale checksum");
        }
    }
    refused(&args, dir.path(), &format!("object storage s3://{BUCKET}/it is format epoch 4"));

    // Another application's objects, no marker.
    let other = tempfile::tempdir().expect("tempdir");
    let section = s3.cold_section("").replace("root = \"it\"", "root = \"other\"");
    let stray = s3.dir.path().join(BUCKET).join("other");
    std::fs::create_dir_all(&stray).expect("a prefix");
    std::fs::write(stray.join("report.csv"), "a,b\n").expect("a stray object");
    let other_args = args_for(other.path(), &section);
    refused(
        &other_args,
        other.path(),
        &format!("object storage s3://{BUCKET}/other is not empty and has no URSULA_FORMAT_EPOCH marker"),
    );

    // A store that does not answer refuses the start too: the node would
    // write (and its snapshot GC delete) in a namespace it could not check.
    let late = tempfile::tempdir().expect("tempdir");
    let section = s3.cold_section("").replace("root = \"it\"", "root = \"late\"");
    let late_args = args_for(late.path(), &section);
    s3.stop();
    refused(&late_args, late.path(), &format!("object storage s3://{BUCKET}/late did not answer the format check"));
    s3.start_again().await;
    let node = Node::spawn(&late_args, None);
    node.create(S, TEXT).await;
    object_becomes(&s3, "late/URSULA_FORMAT_EPOCH", "5\n").await;
}
