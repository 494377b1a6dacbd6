//! A real S3-compatible server for the cold tier's tests: `s3s-fs`
//! serving a temporary directory over HTTP on a loopback port, in the
//! test's own runtime. `stop` closes it (listener and connections) and
//! `start_again` brings it back on the same port with the same objects;
//! `misbehave` keeps the port but hangs every request or fails it with a
//! `500`, as a slow or failing store does.

use std::net::SocketAddr;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

pub const BUCKET: &str = "ursula-test";
pub const ACCESS_KEY: &str = "ursula-test-key";
pub const SECRET_KEY: &str = "ursula-test-secret";

/// How `misbehave` breaks the store.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    Hang,
    Fail,
}

pub struct S3Server {
    pub dir: tempfile::TempDir,
    pub addr: SocketAddr,
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl S3Server {
    pub async fn start() -> S3Server {
        let dir = tempfile::tempdir().expect("a directory for the S3 server");
        std::fs::create_dir(dir.path().join(BUCKET)).expect("the bucket");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binding the S3 server");
        let addr = listener.local_addr().expect("its address");
        let mut server = S3Server { dir, addr, serving: None };
        server.serve(listener);
        server
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let fs = s3s_fs::FileSystem::new(self.dir.path()).expect("s3s-fs over the directory");
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = builder.build();
        self.serving = Some(tokio::spawn(async move {
            // Dropping the set (when this task is aborted) ends every connection.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let service = service.clone();
                connections.spawn(async move {
                    let _ = ConnBuilder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tcp), service).await;
                });
            }
        }));
    }

    /// Takes the port back with a server that hangs (`Fault::Hang`) or
    /// answers `500 InternalError` to everything (`Fault::Fail`).
    pub async fn misbehave(&mut self, fault: Fault) {
        self.stop();
        let listener = rebind(self.addr).await;
        self.serving = Some(tokio::spawn(async move {
            let mut held = Vec::new();
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                match fault {
                    // Accepted and never read: every request runs into its timeout.
                    Fault::Hang => held.push(tcp),
                    Fault::Fail => {
                        connections.spawn(async move {
                            let failing = hyper::service::service_fn(|_req| async {
                                let body = "<?xml version=\"1.0\"?><Error><Code>InternalError</Code>\
                                            <Message>test fault</Message></Error>";
                                hyper::Response::builder()
                                    .status(500)
                                    .header("content-type", "application/xml")
                                    .body(http_body_util::Full::new(bytes::Bytes::from_static(body.as_bytes())))
                            });
                            let _ = ConnBuilder::new(TokioExecutor::new())
                                .serve_connection(TokioIo::new(tcp), failing)
                                .await;
                        });
                    }
                }
            }
        }));
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The S3 server goes away: connections refused until `start_again`.
    pub fn stop(&mut self) {
        if let Some(task) = self.serving.take() {
            task.abort();
        }
    }

    pub async fn start_again(&mut self) {
        self.stop();
        let listener = rebind(self.addr).await;
        self.serve(listener);
    }

    /// `[storage.cold]` for voters that use this server, with `extra` keys
    /// of the section (one `key = value` per line).
    pub fn cold_section(&self, extra: &str) -> String {
        self.cold_section_timed(extra, "2s")
    }

    /// As `cold_section`, with `timeout` per S3 attempt.
    pub fn cold_section_timed(&self, extra: &str, timeout: &str) -> String {
        format!(
            "[storage.cold]\nbackend = \"s3\"\nroot = \"it\"\n{extra}[storage.cold.s3]\nbucket = \"{BUCKET}\"\n\
             region = \"us-east-1\"\nendpoint = \"{}\"\naccess_key_id = \"{ACCESS_KEY}\"\n\
             secret_access_key = \"{SECRET_KEY}\"\ntimeout = \"{timeout}\"\nmax_retries = 1\n",
            self.url()
        )
    }

    /// Every file the server holds under the bucket (objects and parts).
    pub fn files(&self) -> Vec<std::path::PathBuf> {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() { walk(&path, out) } else { out.push(path) }
            }
        }
        let mut out = Vec::new();
        walk(&self.dir.path().join(BUCKET), &mut out);
        out
    }

    /// The files with extension `ext` (`seg`: cold spans, `part`: staged parts).
    pub fn files_with(&self, ext: &str) -> Vec<std::path::PathBuf> {
        self.files().into_iter().filter(|p| p.extension().is_some_and(|e| e == ext)).collect()
    }
}

/// Binds `addr` again once the aborted server task has let it go.
async fn rebind(addr: SocketAddr) -> tokio::net::TcpListener {
    for _ in 0..100 {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => return listener,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    panic!("rebinding the S3 server on {addr}")
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
