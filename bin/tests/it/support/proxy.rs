//! A TCP proxy in front of one port whose connections a test can cut and
//! heal: a network fault between two real processes, or between a node
//! and its S3 store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// A TCP proxy for one directed link; `cut` drops its connections and refuses new ones.
pub struct Link {
    pub port: u16,
    pub cut: Arc<AtomicBool>,
    pub generation: Arc<AtomicU64>,
}

pub async fn link(target: u16) -> Link {
    paced_link(target, None).await
}

/// As [`link`], with what the target sends back flowing at most
/// `answers_per_sec` bytes a second (`None`: as fast as it comes), so a
/// test can cut a link in the middle of a large answer.
pub async fn paced_link(target: u16, answers_per_sec: Option<u64>) -> Link {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy bind");
    let port = listener.local_addr().expect("addr").port();
    let cut = Arc::new(AtomicBool::new(false));
    let generation = Arc::new(AtomicU64::new(0));
    let (c, g) = (cut.clone(), generation.clone());
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            if c.load(Ordering::SeqCst) {
                continue; // dropped: the peer sees the connection close
            }
            let born = g.load(Ordering::SeqCst);
            let (c, g) = (c.clone(), g.clone());
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await else { return };
                let copy = async {
                    match answers_per_sec {
                        None => drop(tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await),
                        Some(rate) => {
                            let (mut from_client, mut to_client) = inbound.split();
                            let (mut from_target, mut to_target) = outbound.split();
                            let asks = tokio::io::copy(&mut from_client, &mut to_target);
                            tokio::select! { _ = asks => {}, () = paced(&mut from_target, &mut to_client, rate) => {} }
                        }
                    }
                };
                let severed = async {
                    while !c.load(Ordering::SeqCst) && g.load(Ordering::SeqCst) == born {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                tokio::select! { () = copy => {}, () = severed => {} }
            });
        }
    });
    Link { port, cut, generation }
}

/// Copies `from` to `to`, pausing after each read for as long as its bytes
/// take at `rate` bytes a second.
async fn paced<R, W>(from: &mut R, to: &mut W, rate: u64)
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate.max(1) as f64)).await;
    }
}

impl Link {
    /// Cuts (or heals) the link: open connections are severed within 20 ms.
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}
