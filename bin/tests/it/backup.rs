//! Backups (issue 21, spec/35 "Backup and disaster recovery"): a backup of
//! a live three-voter cluster under writes with `ursulactl backup-create`,
//! its objects holding what the streams held (bytes, offsets, closure,
//! producer state), `backup-verify` passing on it and failing, by name, on
//! a damaged object and on a missing manifest.

use std::time::Duration;

use serde_json::Value;
use ursula_stream::StreamKey;
use ursula_stream::backup::GroupBackup;

use crate::cluster_leadership::{Load, client, create, start_all, streams_in_distinct_groups};
use crate::ctl::{ctl, manifest, succeeded};
use crate::support::cluster::{Layout, Planes};

const GROUPS: u32 = 4;

/// Sends `method path` with `headers` and `body` to whichever voter takes it.
async fn send(
    http: &reqwest::Client,
    urls: &[String],
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> u16 {
    for _ in 0..300 {
        for url in urls {
            let mut req = http.request(method.clone(), format!("{url}{path}")).body(body.to_string());
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            if let Ok(answer) = req.send().await
                && answer.status() != 503
            {
                return answer.status().as_u16();
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no voter took {method} {path}");
}

fn stored(backups: &[GroupBackup], path: &str) -> ursula_stream::store::StreamState {
    let (bucket, stream) = path.trim_start_matches('/').split_once('/').expect("bucket/stream");
    let key = StreamKey::parse(bucket, stream).expect("key");
    let group = ursula_stream::routing::group_of(&key, GROUPS).0 as usize;
    backups[group].store.live(&key, 0).unwrap_or_else(|| panic!("{path} is in the backup")).clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_of_a_live_cluster_holds_its_streams_and_verifies() {
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
    load.progress().await;
    load.finish().await;

    let manifest_json: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest.json")).expect("JSON");
    assert_eq!((manifest_json["format_version"].clone(), manifest_json["group_count"].clone()), (5.into(), 4.into()));
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
            assert_eq!(&bytes[..2], &[0x95, 0x05], "compact MessagePack, format 5 first");
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
    assert_eq!(verified.trim(), "backup verified: format 5, 4 groups, 6 streams");

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
    let out = ctl(&["backup-create", "--config", &m, "--location", "s3://bucket/prefix"]).await;
    assert_eq!(out.status.code(), Some(1), "s3:// is refused as configuration: {out:?}");
}
