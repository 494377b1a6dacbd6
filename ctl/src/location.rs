//! Where a backup lives (spec/34 "Backup and restore"): a local directory
//! or `s3://bucket/prefix`. An S3 location uses the AWS SDK credential
//! chain and `AWS_REGION`; `AWS_ENDPOINT_URL` names an S3-compatible store
//! (MinIO, ...), addressed path-style.

use std::path::PathBuf;

use aws_sdk_s3::config::BehaviorVersion;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;

use crate::error::{CtlError, Result};

pub enum Location {
    Dir(PathBuf),
    S3 { client: aws_sdk_s3::Client, bucket: String, prefix: String },
}

impl Location {
    /// Parses `location`; an S3 one gets its client (no request is sent yet).
    pub async fn open(location: &str) -> Result<Location> {
        let Some(rest) = location.strip_prefix("s3://") else {
            return Ok(Location::Dir(PathBuf::from(location)));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(CtlError::Config(format!("{location}: an S3 location is s3://bucket/prefix")));
        }
        let shared = aws_config::defaults(BehaviorVersion::latest()).load().await;
        let mut config = aws_sdk_s3::config::Builder::from(&shared);
        if std::env::var_os("AWS_ENDPOINT_URL").is_some() || std::env::var_os("AWS_ENDPOINT_URL_S3").is_some() {
            config = config.force_path_style(true);
        }
        let client = aws_sdk_s3::Client::from_conf(config.build());
        Ok(Location::S3 { client, bucket: bucket.to_string(), prefix: prefix.trim_end_matches('/').to_string() })
    }

    /// `name` as this location shows it in messages.
    pub fn show(&self, name: &str) -> String {
        match self {
            Location::Dir(dir) => dir.join(name).display().to_string(),
            Location::S3 { bucket, prefix, .. } => format!("s3://{bucket}/{}", self.key(prefix, name)),
        }
    }

    fn key(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() { name.to_string() } else { format!("{prefix}/{name}") }
    }

    /// Makes the location ready for writes (a directory is created).
    pub async fn prepare(&self) -> Result<()> {
        match self {
            Location::Dir(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| CtlError::Config(format!("creating {}: {e}", dir.display())))
            }
            Location::S3 { .. } => Ok(()),
        }
    }

    /// Writes object `name` whole: a reader sees all of it or nothing.
    pub async fn put(&self, name: &str, body: Bytes) -> Result<()> {
        match self {
            Location::Dir(dir) => {
                let (temp, done) = (dir.join(format!("{name}.partial")), dir.join(name));
                let io = |e: std::io::Error| CtlError::Config(format!("writing {}: {e}", done.display()));
                std::fs::write(&temp, &body).map_err(io)?;
                std::fs::rename(&temp, &done).map_err(io)
            }
            Location::S3 { client, bucket, prefix } => {
                let key = self.key(prefix, name);
                client
                    .put_object()
                    .bucket(bucket)
                    .key(&key)
                    .body(ByteStream::from(body))
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        CtlError::Transport(format!(
                            "writing {}: {}",
                            self.show(name),
                            aws_sdk_s3::error::DisplayErrorContext(e)
                        ))
                    })
            }
        }
    }

    /// Reads object `name`; `Ok(None)` when it does not exist.
    pub async fn get(&self, name: &str) -> Result<Option<Bytes>> {
        match self {
            Location::Dir(dir) => match std::fs::read(dir.join(name)) {
                Ok(bytes) => Ok(Some(Bytes::from(bytes))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(CtlError::Config(format!("reading {}: {e}", self.show(name)))),
            },
            Location::S3 { client, bucket, prefix } => {
                let failed = |e: String| CtlError::Transport(format!("reading {}: {e}", self.show(name)));
                match client.get_object().bucket(bucket).key(self.key(prefix, name)).send().await {
                    Ok(object) => {
                        let body = object.body.collect().await.map_err(|e| failed(e.to_string()))?;
                        Ok(Some(body.into_bytes()))
                    }
                    Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
                    Err(e) => Err(failed(aws_sdk_s3::error::DisplayErrorContext(e).to_string())),
                }
            }
        }
    }
}
