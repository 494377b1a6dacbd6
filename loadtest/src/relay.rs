//! `ursula-loadtest relay`: a TCP relay that does nothing but move bytes
//! between each client connection and a connection of its own to one
//! upstream. Put beside a gateway in a `compare`, it measures what one
//! more process in the path costs on this host (the added hop's copies,
//! wake-ups and scheduling) with none of a gateway's work.

use std::io::Write;

use tokio::net::{TcpListener, TcpStream};

/// Each direction's buffer: large, so a big answer crosses in few calls.
const BUFFER_BYTES: usize = 1 << 20;

/// Serves on `listen` until killed.
pub async fn serve(listen: &str, upstream: &str) -> anyhow::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    println!("relay listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    loop {
        let (mut client, _) = listener.accept().await?;
        let upstream = upstream.to_string();
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(&upstream).await else { return };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let _ =
                tokio::io::copy_bidirectional_with_sizes(&mut client, &mut server, BUFFER_BYTES, BUFFER_BYTES).await;
        });
    }
}
