//! `ursula-loadtest s3-server`: an S3-compatible server (`s3s-fs` over a
//! directory) on loopback, so a benchmark of the cold tier runs against a
//! real S3 protocol peer on the same machine.
//!
//! `s3s-fs` streams an object's bytes in 4 KiB reads, each a hop through
//! tokio's blocking pool (about 10 ms of its CPU per MiB here): that, not
//! the node, bounded cold reads. By default a ranged `GET` is answered from
//! a mapping of the object's file instead (as a real object store would
//! serve it, at the speed of the disk); `--stock-gets` keeps `s3s-fs`'s own.

use std::io::Write;
use std::path::PathBuf;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::dto::{self, Range, StreamingBlob};
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};

/// Serves `dir` (each subdirectory a bucket) on `listen` until killed.
pub async fn serve(
    dir: &str,
    listen: &str,
    access_key: &str,
    secret_key: &str,
    stock_gets: bool,
) -> anyhow::Result<()> {
    let fs = s3s_fs::FileSystem::new(dir).map_err(|e| anyhow::anyhow!("s3s-fs over {dir}: {e:?}"))?;
    let root = std::env::current_dir()?.join(dir).canonicalize()?;
    let mut builder = S3ServiceBuilder::new(Store { fs, root, stock_gets });
    builder.set_auth(SimpleAuth::from_single(access_key, secret_key));
    let service = builder.build();
    let listener = tokio::net::TcpListener::bind(listen).await?;
    println!("s3 listening on http://{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let service = service.clone();
        tokio::spawn(async move {
            let _ = ConnBuilder::new(TokioExecutor::new()).serve_connection(TokioIo::new(tcp), service).await;
        });
    }
}

/// `s3s-fs` for every operation the cold tier uses, with its ranged `GET`
/// bodies read in one go.
struct Store {
    fs: s3s_fs::FileSystem,
    root: PathBuf,
    stock_gets: bool,
}

/// `len` bytes of `path` at `offset`, mapped: served from the page cache
/// without first copying them into a zeroed buffer (which was 40 % of this
/// server's CPU in a cold catch-up, on the cores the node under test uses).
async fn read_at(path: PathBuf, offset: u64, len: usize) -> std::io::Result<bytes::Bytes> {
    if len == 0 {
        return Ok(bytes::Bytes::new());
    }
    let file = std::fs::File::open(path)?;
    // SAFETY: objects are written once under a fresh key and never changed
    // in place (the cold tier never reuses a key), so the mapped bytes do
    // not change while the answer is sent; a deleted file stays mapped.
    let map = unsafe { memmap2::MmapOptions::new().offset(offset).len(len).map(&file)? };
    Ok(bytes::Bytes::from_owner(map))
}

#[async_trait::async_trait]
impl S3 for Store {
    async fn get_object(&self, req: S3Request<dto::GetObjectInput>) -> S3Result<S3Response<dto::GetObjectOutput>> {
        let first = match req.input.range {
            Some(Range::Int { first, .. }) => first,
            None => 0,
            Some(Range::Suffix { .. }) => return self.fs.get_object(req).await,
        };
        let path = self.root.join(&req.input.bucket).join(&req.input.key);
        // s3s-fs checks the key, opens the file and answers the headers; its
        // body (a lazy stream) is replaced before anything reads it.
        let mut answer = self.fs.get_object(req).await?;
        if self.stock_gets {
            return Ok(answer);
        }
        let len = answer.output.content_length.and_then(|l| usize::try_from(l).ok()).unwrap_or(0);
        let bytes = read_at(path, first, len).await.map_err(|e| s3_error!(e, InternalError))?;
        answer.output.body = Some(StreamingBlob::from(s3s::Body::from(bytes)));
        Ok(answer)
    }

    async fn put_object(&self, req: S3Request<dto::PutObjectInput>) -> S3Result<S3Response<dto::PutObjectOutput>> {
        self.fs.put_object(req).await
    }

    async fn head_object(&self, req: S3Request<dto::HeadObjectInput>) -> S3Result<S3Response<dto::HeadObjectOutput>> {
        self.fs.head_object(req).await
    }

    async fn delete_object(
        &self,
        req: S3Request<dto::DeleteObjectInput>,
    ) -> S3Result<S3Response<dto::DeleteObjectOutput>> {
        self.fs.delete_object(req).await
    }

    async fn delete_objects(
        &self,
        req: S3Request<dto::DeleteObjectsInput>,
    ) -> S3Result<S3Response<dto::DeleteObjectsOutput>> {
        self.fs.delete_objects(req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<dto::ListObjectsV2Input>,
    ) -> S3Result<S3Response<dto::ListObjectsV2Output>> {
        self.fs.list_objects_v2(req).await
    }

    async fn head_bucket(&self, req: S3Request<dto::HeadBucketInput>) -> S3Result<S3Response<dto::HeadBucketOutput>> {
        self.fs.head_bucket(req).await
    }

    async fn create_bucket(
        &self,
        req: S3Request<dto::CreateBucketInput>,
    ) -> S3Result<S3Response<dto::CreateBucketOutput>> {
        self.fs.create_bucket(req).await
    }
}
