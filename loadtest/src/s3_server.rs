//! `ursula-loadtest s3-server`: an S3-compatible server (`s3s-fs` over a
//! directory) on loopback, so a benchmark of the cold tier runs against a
//! real S3 protocol peer on the same machine.

use std::io::Write;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

/// Serves `dir` (each subdirectory a bucket) on `listen` until killed.
pub async fn serve(dir: &str, listen: &str, access_key: &str, secret_key: &str) -> anyhow::Result<()> {
    let fs = s3s_fs::FileSystem::new(dir).map_err(|e| anyhow::anyhow!("s3s-fs over {dir}: {e:?}"))?;
    let mut builder = S3ServiceBuilder::new(fs);
    builder.set_auth(SimpleAuth::from_single(access_key, secret_key));
    let service = builder.build();
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("s3 listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    loop {
        let (tcp, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            let _ = ConnBuilder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tcp), service).await;
        });
    }
}
