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
                let copy = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                let severed = async {
                    while !c.load(Ordering::SeqCst) && g.load(Ordering::SeqCst) == born {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                tokio::select! { _ = copy => {}, () = severed => {} }
            });
        }
    });
    Link { port, cut, generation }
}

impl Link {
    /// Cuts (or heals) the link: open connections are severed within 20 ms.
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}
