//! A catch-up read streamed through a gateway whose link to the voter
//! breaks in the middle of the answer (issue 24: reads stream from the
//! voter as they come). The gateway has sent `200` and the length before
//! the bytes, so it cannot answer an error any more: the client's
//! connection must break short of the length, never end as a whole-looking
//! body with the rest missing. The next read, once the link is back, is
//! whole.

use std::time::{Duration, Instant};

use crate::cluster::wait_ready;
use crate::support::cluster::free_port;
use crate::support::proxy::paced_link;
use crate::support::{Node, pattern};

const S: &str = "/gateway/streamed-read";
const OCTETS: &str = "application/octet-stream";
const MIB: usize = 1024 * 1024;
/// Eight 1 MiB appends: one read answers them all (its 8 MiB limit).
const PIECES: usize = 8;
/// What the voter's answers flow at through the proxy: an 8 MiB answer
/// takes two seconds, long enough to cut it in the middle.
const PACE: u64 = 4 * MIB as u64;

/// Reads the answer's body until it ends or breaks: the bytes, and whether it broke.
async fn body_of(mut answer: reqwest::Response, stop_after: Option<(usize, &dyn Fn())>) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut stop = stop_after;
    loop {
        match answer.chunk().await {
            Ok(Some(piece)) => got.extend_from_slice(&piece),
            Ok(None) => return (got, false),
            Err(_) => return (got, true),
        }
        if let Some((at, cut)) = stop
            && got.len() >= at
        {
            cut();
            stop = None;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_cut_off_upstream_breaks_the_clients_connection_and_the_next_is_whole() {
    // A one-voter cluster whose client URL (the one its Describe names, the
    // one the gateway dials) is the proxy in front of its port.
    let (port, admin) = (free_port(), free_port());
    let link = paced_link(port, Some(PACE)).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("n1.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin}\"\ncluster_id = \"gateway-reads\"\n\
         [raft]\nnode_id = 1\ngroup_count = 2\ninit_membership_per_group = true\n[raft.wal]\npath = {:?}\n\
         [[raft.peers]]\nnode_id = 1\nurl = \"http://127.0.0.1:{port}\"\nclient_url = \"http://127.0.0.1:{}\"\n",
        dir.path().join("wal"),
        link.port,
    );
    std::fs::write(&config, text).expect("the voter's config");
    let voter = Node::spawn(&["server".into(), "--config".into(), config.display().to_string()], None);
    wait_ready(&voter).await;
    let upstream = format!("http://127.0.0.1:{}", link.port);
    let gateway =
        Node::spawn(&["gateway".into(), "--listen".into(), "127.0.0.1:0".into(), "--upstream".into(), upstream], None);

    voter.create(S, OCTETS).await;
    let stream = pattern(PIECES * MIB);
    for piece in stream.chunks(MIB) {
        voter.append(S, OCTETS, piece.to_vec()).await;
    }

    let http = reqwest::Client::new();
    let url = gateway.url(&format!("{S}?offset=-1"));
    let answer = http.get(&url).send().await.expect("the gateway answers");
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.content_length(), Some((PIECES * MIB) as u64), "the length comes before the bytes");
    let cut = || link.set_cut(true);
    let (got, broke) = body_of(answer, Some((MIB, &cut))).await;
    assert!(broke, "the client's body broke off (got {} of {} bytes)", got.len(), PIECES * MIB);
    assert!(got.len() < PIECES * MIB, "the cut came before the answer's end: {} bytes", got.len());
    assert_eq!(got[..], stream[..got.len()], "what came is the stream's own prefix");

    // The link back: the gateway reconnects and the same read is whole.
    link.set_cut(false);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = http.get(&url).send().await.expect("the gateway answers");
        if answer.status() == 200 {
            let (got, broke) = body_of(answer, None).await;
            assert!(!broke && got == stream, "the read after the link is back is whole ({} bytes)", got.len());
            break;
        }
        assert_eq!(answer.status(), 503, "while the gateway finds its voter again");
        assert!(Instant::now() < deadline, "the gateway never read the stream again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
