//! Backups (issue 21, spec/35 "Backup and disaster recovery"): the
//! recovery drill. A backup of a live three-voter cluster under writes with
//! `ursulactl backup-create` (to a directory, and to a real S3-compatible
//! store), its objects holding what the streams held (bytes, offsets,
//! closure, snapshot, producer state), `backup-verify` of both;
//! the cluster destroyed and `ursulactl restore` into a fresh one: every
//! stream as the backup had it under a new `Stream-Incarnation` naming the
//! old one, producers' epochs closed by the history, appends continuing, a
//! repeat of the restore a no-op and a restore into a cluster with data
//! refused; `backup-verify` failing, by name, on a damaged object and on a
//! missing manifest.

use std::time::Duration;

use serde_json::Value;
use ursula_stream::StreamKey;
use ursula_stream::backup::GroupBackup;

use crate::cluster_leadership::{Load, client, create, start_all, streams_in_distinct_groups};
use crate::ctl::{ctl, ctl_env, manifest, succeeded};
use crate::support::cluster::{Layout, Planes};
use crate::support::s3::{ACCESS_KEY, BUCKET, S3Server, SECRET_KEY};

const GROUPS: u32 = 4;

/// The first answer to `build`'s request that `take` accepts, from any
/// voter, trying them all for up to a minute.
async fn from_any_voter(
    urls: &[String],
    what: &str,
    build: impl Fn(&str) -> reqwest::RequestBuilder,
    take: impl Fn(u16) -> bool,
) -> reqwest::Response {
    for _ in 0..300 {
        for url in urls {
            if let Ok(answer) = build(url).send().await
                && take(answer.status().as_u16())
            {
                return answer;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no voter answered {what}");
}

/// Sends `method path` with `headers` and `body` to whichever voter takes it.
async fn send(
    http: &reqwest::Client,
    urls: &[String],
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> u16 {
    let build = |url: &str| {
        let mut req = http.request(method.clone(), format!("{url}{path}")).body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req
    };
    from_any_voter(urls, &format!("{method} {path}"), build, |status| status != 503).await.status().as_u16()
}

fn stored(backups: &[GroupBackup], path: &str) -> ursula_stream::store::StreamState {
    let (bucket, stream) = path.trim_start_matches('/').split_once('/').expect("bucket/stream");
    let key = StreamKey::parse(bucket, stream).expect("key");
    let group = ursula_stream::routing::group_of(&key, GROUPS).0 as usize;
    backups[group].store.live(&key, 0).unwrap_or_else(|| panic!("{path} is in the backup")).clone()
}

/// The headers of a `HEAD` of `path` from whichever voter answers `200`.
async fn head(http: &reqwest::Client, urls: &[String], path: &str) -> reqwest::header::HeaderMap {
    let what = format!("HEAD {path}");
    let answer = from_any_voter(urls, &what, |url| http.head(format!("{url}{path}")), |s| s == 200).await;
    answer.headers().clone()
}

fn value<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// A `GET` of `path` from offset `-1` to the tail: its body.
async fn read_all(http: &reqwest::Client, urls: &[String], path: &str) -> String {
    let read = |url: &str| http.get(format!("{url}{path}?offset=-1"));
    from_any_voter(urls, &format!("GET {path}"), read, |s| s == 200).await.text().await.expect("a body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_restore_drill_preserves_streams_and_allows_continued_appends() {
    let layout = Layout::new(3, "backup", GROUPS, Planes::Shared);
    let _nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let post = reqwest::Method::POST;
    let text = [("content-type", "text/plain")];

    // A stream with bytes, a closed one, one with a producer, a JSON one.
    for path in ["/books/plain", "/books/closed", "/tasks/produced"] {
        create(&http, &urls, path).await;
    }
    assert_eq!(send(&http, &urls, post.clone(), "/books/plain", &text, "hello, ").await, 204);
    assert_eq!(send(&http, &urls, post.clone(), "/books/plain", &text, "world").await, 204);
    let closing = [("content-type", "text/plain"), ("stream-closed", "true")];
    assert_eq!(send(&http, &urls, post.clone(), "/books/closed", &closing, "the end").await, 204);
    for seq in 0..3 {
        let seq = seq.to_string();
        let producer =
            [("content-type", "text/plain"), ("producer-id", "p1"), ("producer-epoch", "2"), ("producer-seq", &seq)];
        assert_eq!(send(&http, &urls, post.clone(), "/tasks/produced", &producer, "x").await, 200);
    }
    let snapshot = format!("/books/plain/snapshot/{:020}", 12);
    assert_eq!(send(&http, &urls, reqwest::Method::PUT, &snapshot, &text, "state at 12").await, 204);
    let json = [("content-type", "application/json")];
    assert_eq!(send(&http, &urls, reqwest::Method::PUT, "/tasks/json", &json, r#"[{"a":1},{"b":2}]"#).await, 201);

    // Writers keep going while the backup runs.
    let live = streams_in_distinct_groups("live", 2, GROUPS);
    for path in &live {
        create(&http, &urls, path).await;
    }
    let load = Load::start(&urls, &live);
    load.progress().await;

    let m = manifest(&layout, "cluster.json");
    let dir = layout.dir.path().join("backup-1");
    let location = dir.display().to_string();
    let out = ctl(&["backup-create", "--config", &m, "--location", &location, "--created-unix-ms", "1234"]).await;
    let said = succeeded(&out, "backup-create");
    assert!(said.starts_with("backup of 4 groups ("), "{said}");
    // The same backup, once the writers stopped, in an S3-compatible store as well.
    load.progress().await;
    load.finish().await;
    let s3 = S3Server::start().await;
    let aws = [
        ("AWS_ENDPOINT_URL", format!("http://{}", s3.addr)),
        ("AWS_REGION", "us-east-1".to_string()),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
    ];
    let in_s3 = format!("s3://{BUCKET}/backups/drill");
    let out = ctl_env(&["backup-create", "--config", &m, "--location", &in_s3], &aws).await;
    assert!(succeeded(&out, "backup-create to S3").contains(&in_s3));
    assert!(s3.dir.path().join(BUCKET).join("backups/drill/manifest.json").exists(), "manifest.json in the store");

    let manifest_json: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest.json")).expect("JSON");
    assert_eq!((manifest_json["format_version"].clone(), manifest_json["group_count"].clone()), (6.into(), 4.into()));
    assert_eq!(
        (manifest_json["created_unix_ms"].clone(), manifest_json["cluster_id"].clone()),
        (1234.into(), "backup".into())
    );
    let groups = manifest_json["groups"].as_array().expect("groups");
    let streams: u64 = groups.iter().map(|g| g["streams"].as_u64().unwrap_or(0)).sum();
    assert_eq!(streams, 6, "{manifest_json}");

    // The objects hold what the streams held.
    let backups: Vec<GroupBackup> = groups
        .iter()
        .map(|g| {
            let bytes = std::fs::read(dir.join(g["object"].as_str().expect("object"))).expect("object");
            assert_eq!(&bytes[..2], &[0x95, 0x06], "compact MessagePack, format 6 first");
            GroupBackup::decode(&bytes).expect("decodes")
        })
        .collect();
    let plain = stored(&backups, "/books/plain");
    assert_eq!((plain.data.tail().0, plain.closed), (12, false));
    let closed = stored(&backups, "/books/closed");
    assert_eq!((closed.data.tail().0, closed.closed), (7, true));
    let produced = stored(&backups, "/tasks/produced");
    let p1 = produced.producers().get("p1").expect("producer p1 kept");
    assert_eq!((p1.epoch, p1.last_seq, produced.data.tail().0), (2, 2, 3));
    assert!(stored(&backups, "/tasks/json").content_type.is_json());
    for path in &live {
        assert!(stored(&backups, path).data.tail().0 > 0, "{path}: the writes before the backup are in it");
    }

    let verified = succeeded(&ctl(&["backup-verify", "--location", &location]).await, "backup-verify");
    assert_eq!(verified.trim(), "backup verified: format 6, 4 groups, 6 streams");
    let verified = succeeded(&ctl_env(&["backup-verify", "--location", &in_s3], &aws).await, "backup-verify of S3");
    assert_eq!(verified.trim(), "backup verified: format 6, 4 groups, 6 streams");

    // The source as the S3 backup holds it (no writes since), then the source is gone.
    let fixed = ["/books/plain", "/books/closed", "/tasks/produced", "/tasks/json"];
    let mut before = Vec::new();
    for path in fixed.iter().copied().chain(live.iter().map(String::as_str)) {
        before.push((path.to_string(), head(&http, &urls, path).await, read_all(&http, &urls, path).await));
    }
    drop(_nodes);

    // A fresh cluster with the source's cluster id and group count.
    let target = Layout::new(3, "backup", GROUPS, Planes::Shared);
    let _restored = start_all(&target).await;
    let urls = target.client_urls();
    let m2 = manifest(&target, "cluster.json");
    let said = succeeded(&ctl_env(&["restore", "--config", &m2, "--location", &in_s3], &aws).await, "restore");
    assert!(said.starts_with("restored 4 groups (6 streams, "), "{said}");

    for (path, old, body) in &before {
        let now = head(&http, &urls, path).await;
        assert_eq!(&read_all(&http, &urls, path).await, body, "{path}: the bytes the source served");
        assert_eq!(value(&now, "stream-next-offset"), value(old, "stream-next-offset"), "{path}: the tail");
        assert_ne!(value(&now, "stream-incarnation"), value(old, "stream-incarnation"), "{path}: a new history");
        assert_eq!(value(&now, "stream-previous-incarnation"), value(old, "stream-incarnation"), "{path}");
        assert_eq!(value(&now, "stream-inherited-offset"), value(&now, "stream-next-offset"), "{path}");
        assert_eq!(value(&now, "stream-closed"), value(old, "stream-closed"), "{path}: closure");
        assert_eq!(value(&now, "content-type"), value(old, "content-type"), "{path}");
        assert_eq!(value(&now, "stream-snapshot-offset"), value(old, "stream-snapshot-offset"), "{path}: snapshot");
    }
    let plain = head(&http, &urls, "/books/plain").await;
    assert_eq!(value(&plain, "stream-snapshot-offset"), format!("{:020}", 12));
    let got = http.get(format!("{}{snapshot}", urls[0])).send().await.expect("snapshot read");
    assert_eq!(got.text().await.expect("body"), "state at 12");

    // The producer's epoch is closed by the history; a repeat keeps its receipt.
    let write = |seq: &'static str, epoch: &'static str| {
        [("content-type", "text/plain"), ("producer-id", "p1"), ("producer-epoch", epoch), ("producer-seq", seq)]
    };
    let mut request = http.post(format!("{}/tasks/produced", urls[0])).body("y");
    for (name, v) in write("3", "2") {
        request = request.header(name, v);
    }
    let refused = request.send().await.expect("answer");
    assert_eq!(refused.status(), 403);
    assert_eq!(value(refused.headers(), "producer-outcome"), "epoch-closed;by=history");
    assert_eq!(
        (value(refused.headers(), "producer-closed-epoch"), value(refused.headers(), "producer-closed-seq")),
        ("2", "2")
    );
    assert_eq!(send(&http, &urls, post.clone(), "/tasks/produced", &write("2", "2"), "x").await, 204);
    assert_eq!(send(&http, &urls, post.clone(), "/tasks/produced", &write("0", "3"), "z").await, 200);
    assert_eq!(read_all(&http, &urls, "/tasks/produced").await, "xxxz");

    // Appends continue.
    assert_eq!(send(&http, &urls, post.clone(), "/books/plain", &text, "!").await, 204);
    assert_eq!(read_all(&http, &urls, "/books/plain").await, "hello, world!");
    assert_eq!(send(&http, &urls, post.clone(), "/books/closed", &text, "more").await, 409, "still closed");

    // A repeat of the restore changes nothing; another backup into a cluster with data is refused.
    let again = succeeded(&ctl_env(&["restore", "--config", &m2, "--location", &in_s3], &aws).await, "a repeat");
    assert!(again.contains("4 had been imported by an earlier run"), "{again}");
    let second = target.dir.path().join("backup-2").display().to_string();
    succeeded(&ctl(&["backup-create", "--config", &m2, "--location", &second]).await, "backup-create");
    let out = ctl(&["restore", "--config", &m2, "--location", &second]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("already hold data; nothing was imported"), "{stderr}");
    assert_eq!(read_all(&http, &urls, "/books/plain").await, "hello, world!");

    // A damaged object and a missing manifest fail, naming the check.
    let object = dir.join(groups[1]["object"].as_str().expect("object"));
    let mut bytes = std::fs::read(&object).expect("object");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&object, bytes).expect("damaged");
    let out = ctl(&["backup-verify", "--location", &location]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("group 1: BLAKE3 mismatch"), "{stderr}");
    std::fs::remove_file(dir.join("manifest.json")).expect("remove");
    let out = ctl(&["backup-verify", "--location", &location]).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("an incomplete backup"), "{out:?}");
}
