//! A gateway sends the small appends its clients send meanwhile together,
//! on one `AppendStream` per voter: each append still gets its own answer
//! (success, refusal, producer outcome) and lands once, on its own stream.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::support::Node;
use crate::support::cluster::gateway_over_voters;

const STREAMS: usize = 8;
const PER_STREAM: usize = 40;

async fn metric(gw: &Node, name: &str) -> u64 {
    let m = gw.get("/__ursula/gateway/metrics").send().await.expect(200).json();
    m[name].as_u64().unwrap_or_else(|| panic!("no {name} in {m}"))
}

fn line(stream: usize, n: usize) -> String {
    format!("s{stream}-{n:03}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_through_a_gateway_are_batched_and_each_keeps_its_own_answer() {
    let gw = gateway_over_voters(&[]);
    for s in 0..STREAMS {
        gw.create(&format!("/batches/s{s}"), "text/plain").await.expect(201);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut wave = 0;
    // Waves of concurrent appends until some batch carried more than one
    // (on a loaded host the first wave may not).
    loop {
        let appends = (0..STREAMS).flat_map(|s| (0..PER_STREAM).map(move |n| (s, n))).map(|(s, n)| {
            let gw = &gw;
            async move {
                let path = format!("/batches/s{s}");
                // Every fifth one is refused on its own: wrong content type.
                let content_type = if n % 5 == 4 { "application/json" } else { "text/plain" };
                let sent = gw.post(&path).content_type(content_type).body(line(s, wave * PER_STREAM + n)).send();
                (n, sent.await)
            }
        });
        let refused_by_nothing = gw.post("/batches/missing").content_type("text/plain").body("x").send();
        let (answers, missing) = tokio::join!(join_all(appends), refused_by_nothing);
        missing.expect_error(404, "STREAM_NOT_FOUND");
        for (n, answer) in answers {
            if n % 5 == 4 {
                answer.expect_error(409, "CONTENT_TYPE_MISMATCH");
            } else {
                answer.expect(204);
            }
        }
        wave += 1;
        let (calls, batched) = (metric(&gw, "append_batch_calls").await, metric(&gw, "batched_appends").await);
        assert!(batched <= (wave * (STREAMS * PER_STREAM + 1)) as u64, "{batched} batched appends counted");
        if batched > calls {
            break;
        }
        assert!(Instant::now() < deadline, "no batch carried two appends ({calls} calls, {batched} appends)");
    }
    // They went on the voters' append streams (not the older voters' batch
    // calls), none of which failed.
    assert!(metric(&gw, "append_streams_opened").await >= 1, "no append stream opened");
    assert_eq!(metric(&gw, "append_streams_lost").await, 0, "an append stream failed");
    // Each stream holds exactly its accepted appends, once each.
    for s in 0..STREAMS {
        let read = gw.read_all(&format!("/batches/s{s}")).await;
        read.expect(200);
        let text = read.text();
        let got: Vec<&str> = text.split_inclusive('\n').collect();
        let unique: BTreeSet<&str> = got.iter().copied().collect();
        let want: BTreeSet<String> =
            (0..wave * PER_STREAM).filter(|n| n % PER_STREAM % 5 != 4).map(|n| line(s, n)).collect();
        assert_eq!(got.len(), unique.len(), "stream {s} holds a line twice");
        assert_eq!(unique, want.iter().map(String::as_str).collect::<BTreeSet<_>>(), "stream {s}");
    }
}
