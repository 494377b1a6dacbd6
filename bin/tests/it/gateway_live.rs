//! Live reads through `ursula gateway` (issue 8): SSE readers of one
//! stream share one upstream watch, and a kill -9 of the groups' leader
//! ends their sessions cleanly, so each resumes from its last
//! `streamNextOffset` through the new leader and reads every record once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::gateway::{S, TEXT, gateway, no_redirects, record, write, writer};
use crate::support::Node;
use crate::support::cluster::{Layout, Planes};
use crate::support::sse_payload;

const READERS: usize = 3;
const RECORDS: u64 = 40;
const PATIENCE: Duration = Duration::from_secs(60);

/// What one reader saw: the payload, and how many sessions ended under it.
struct Seen {
    text: String,
    clean_ends: usize,
}

/// Reads `S` over SSE from the start until `len` bytes arrived, opening a
/// new session from the last `streamNextOffset` whenever one ends.
async fn read_live(gw: Arc<Node>, len: usize) -> Seen {
    let deadline = Instant::now() + PATIENCE;
    let mut next = "-1".to_string();
    let mut seen = Seen { text: String::new(), clean_ends: 0 };
    while seen.text.len() < len {
        assert!(Instant::now() < deadline, "the reader stalled at {next}: {:?}", seen.text);
        let mut sse = gw.sse(&format!("{S}?offset={next}&live=sse")).await;
        if sse.status != 200 {
            // No leader yet: a client retries.
            assert_eq!(sse.status, 503, "an SSE open through the gateway");
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        while let Some(event) = sse.next().await {
            assert!(!event.is("error"), "a leader change must end the session cleanly: {event:?}");
            if event.is("data") {
                seen.text.push_str(&String::from_utf8(sse_payload(&[event], false)).expect("UTF-8"));
            } else if event.is("control") {
                next = event.json()["streamNextOffset"].as_str().expect("streamNextOffset").to_string();
                if seen.text.len() >= len {
                    return seen;
                }
            }
        }
        seen.clean_ends += 1;
    }
    seen
}

async fn metrics(gw: &Node) -> serde_json::Value {
    gw.get("/__ursula/gateway/metrics").send().await.expect(200).json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_readers_share_one_upstream_watch_and_resume_across_a_leader_kill() {
    let layout = Layout::new(3, "gateway-live", 4, Planes::Shared);
    let mut voters: Vec<Option<Node>> = (0..3).map(|i| Some(layout.start(i))).collect();
    for v in voters.iter().flatten() {
        wait_ready(v).await;
    }
    let gw = Arc::new(gateway(&layout));
    wait_ready(&gw).await;
    gw.create(S, TEXT).await;
    let mut producer = writer(no_redirects());
    let urls = [gw.base().to_string()];
    for seq in 0..10 {
        write(&mut producer, &urls, seq).await;
    }
    let expected: String = (0..RECORDS).map(record).collect();
    let readers: Vec<_> = (0..READERS).map(|_| tokio::spawn(read_live(gw.clone(), expected.len()))).collect();

    // Every reader waits on the one upstream watch of the stream.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let m = metrics(&gw).await;
        if m["live_readers"] == READERS as u64 {
            assert_eq!(m["upstream_watches"], 1, "{READERS} readers of one stream share one watch: {m}");
            break;
        }
        assert!(Instant::now() < deadline, "the readers never all waited: {m}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for seq in 10..20 {
        write(&mut producer, &urls, seq).await;
    }
    // The stream's leader goes (the voters share the groups' leaderships).
    let group = crate::cluster_leadership::group_of(S, layout.group_count);
    let urls_of_voters = layout.client_urls();
    let http = no_redirects();
    let leaders =
        crate::cluster_leadership::wait_leaders(&http, &urls_of_voters, PATIENCE, "every group led", |_| true).await;
    let leader = usize::try_from(leaders[group] - 1).expect("a voter index");
    voters[leader].take().expect("the leader").kill9();
    for seq in 20..RECORDS {
        write(&mut producer, &urls, seq).await;
    }
    for reader in readers {
        let seen = reader.await.expect("a reader");
        assert_eq!(seen.text, expected, "every record once, in order, across the leader change");
        assert!(seen.clean_ends >= 1, "the leader's kill ended the session, which the reader resumed");
    }
    let m = metrics(&gw).await;
    assert!(m["shared_watch_waits"].as_u64().unwrap_or(0) > 0, "{m}");
}
