//! A leadership transfer asked while a large write of the group is under
//! way: the write finishes and is acknowledged before the transfer
//! triggers, and one that arrives during the transfer is refused as not
//! proposed (`NO_LEADER`), so its client sends it again; never
//! `OUTCOME_UNKNOWN`, and every write is held exactly once. Without the
//! fence, openraft's transfer stopped the leader while the 32 MiB entry was
//! on no follower: the target could not campaign (its log was behind), an
//! election followed, and a leader elected without the entry would drop it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::cluster_leadership::{
    agreed_leaders, check_triggered, client, create, group_of, incarnation_of, index, start_all, transfer, wait_leaders,
};
use crate::support::cluster::{Layout, Planes};
use crate::support::offset;

const S: &str = "/fence/big";
const MIB: usize = 1024 * 1024;
const PATIENCE: Duration = Duration::from_secs(60);
/// How long a transfer's target may take to lead.
const HANDOVER: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_asked_during_a_32_mib_write_lets_it_finish_first() {
    let mut layout = Layout::new(3, "transfer-fence", 4, Planes::Shared);
    // Moves by hand only.
    layout.sections = "[governance.leadership_balance]\nenabled = false\n".into();
    let _nodes = start_all(&layout).await;
    let (http, urls) = (client(), layout.client_urls());
    let group = group_of(S, layout.group_count);
    create(&http, &urls, S).await;
    let mut leader = wait_leaders(&http, &urls, PATIENCE, "every group led", |_| true).await[group];
    for round in 0..4u8 {
        let to = (1..=3).find(|id| *id != leader).expect("another voter");
        // The write goes to the leader; `sent` fires once its last piece is handed over.
        let (sent, body_sent) = oneshot::channel::<()>();
        let mut sent = Some(sent);
        let piece = Bytes::from(vec![b'a' + round; MIB]);
        let pieces = (0..32).map(move |i| {
            if i == 31 {
                sent.take().map(|s| s.send(()));
            }
            Ok::<_, std::io::Error>(piece.clone())
        });
        let write = http
            .post(format!("{}{S}", urls[index(leader)]))
            .header("content-type", "text/plain")
            .header("content-length", (32 * MIB).to_string())
            .body(reqwest::Body::wrap_stream(futures_util::stream::iter(pieces)))
            .timeout(Duration::from_secs(60))
            .send();
        let write = tokio::spawn(write);
        body_sent.await.expect("the body was sent");
        // Most rounds ask while the entry replicates (a debug build takes
        // hundreds of milliseconds over it); some before it was proposed.
        tokio::time::sleep(Duration::from_millis(100 * u64::from(round))).await;
        // Asked while the entry replicates: it waits for the write, or
        // refuses (409) when the write takes longer than its wait.
        let incarnation = incarnation_of(&http, &layout, leader).await;
        let (status, answer) = transfer(&http, &layout, leader, group, to, Some(&incarnation)).await;
        let written = write.await.expect("the write task").expect("the write is answered");
        let (code, headers) = (written.status().as_u16(), written.headers().clone());
        let text = written.text().await.unwrap_or_default();
        eprintln!("round {round}: the write answered {code}, the transfer from {leader} to {to} {status} {answer}");
        // A write under way is acknowledged; one that met the fence was not
        // proposed (`NO_LEADER`, retried below). Never `OUTCOME_UNKNOWN`.
        let refused = code == 503 && text.contains("\"NO_LEADER\"");
        assert!(code == 204 || refused, "round {round}: the write: {code} {headers:?} {text}");
        assert!(status == 200 || status == 409, "round {round}: {status} {answer}");
        if status == 200 {
            check_triggered(&answer, group, leader, to);
        }
        leader = settle(&http, &urls, group, (status == 200).then_some(to)).await;
        if refused {
            write_again(&http, &urls, group, vec![b'a' + round; 32 * MIB]).await;
            leader = settle(&http, &urls, group, None).await;
        }
        // The new leader holds every write so far, each exactly once.
        let tail = http.head(format!("{}{S}", urls[index(leader)])).send().await.expect("HEAD on the leader");
        let next = tail.headers().get("stream-next-offset").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let want = offset((u64::from(round) + 1) * 32 * MIB as u64);
        assert_eq!(next.as_deref(), Some(want.as_str()), "round {round}: {:?}", tail.headers());
    }
}

/// The group's leader once the voters agree, after a transfer to `target`
/// (`None`: none): its target campaigns at once, but on a loaded host an
/// election may pick another voter, which is not what this test is about.
async fn settle(http: &reqwest::Client, urls: &[String], group: usize, target: Option<u64>) -> u64 {
    let deadline = Instant::now() + HANDOVER;
    loop {
        let agreed = agreed_leaders(http, urls).await.map(|l| l[group]);
        match (agreed, target) {
            (Some(leader), Some(target)) if leader == target => return leader,
            (Some(leader), None) => return leader,
            (Some(leader), Some(target)) if Instant::now() >= deadline => {
                eprintln!("voter {leader} leads group {group}, not the transfer's target {target}");
                return leader;
            }
            _ => {}
        }
        assert!(Instant::now() < deadline + PATIENCE, "the voters never agreed on group {group}'s leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Appends `body` at the group's leader until it is acknowledged: a write
/// that met the fence was not proposed, so it is sent again.
async fn write_again(http: &reqwest::Client, urls: &[String], group: usize, body: Vec<u8>) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let leader = settle(http, urls, group, None).await;
        let again = http.post(format!("{}{S}", urls[index(leader)])).header("content-type", "text/plain");
        let answer = again.body(body.clone()).send().await.expect("the write again");
        let code = answer.status().as_u16();
        if code == 204 {
            return;
        }
        let text = answer.text().await.unwrap_or_default();
        assert!(matches!(code, 307 | 503) && !text.contains("OUTCOME_UNKNOWN"), "the write again: {code} {text}");
        assert!(Instant::now() < deadline, "the write again: {code} {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
