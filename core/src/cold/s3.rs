//! The cold store on S3 or an S3-compatible server (`storage.cold.s3.*`):
//! static keys or the standard AWS credential chain, server-side
//! encryption on every write, a per-attempt timeout and bounded retries.

use std::time::Duration;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, ResponseChecksumValidation};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumMode, ServerSideEncryption};
use bytes::Bytes;

use super::store::{ColdError, ColdResult, ColdStore, OnPiece};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Encryption {
    Aes256,
    AwsKms { key_id: Option<String> },
    None,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    pub region: String,
    /// For S3-compatible stores (path-style addressing).
    pub endpoint: Option<String>,
    /// Static keys; `None` uses the standard credential chain.
    pub static_keys: Option<StaticKeys>,
    pub encryption: Encryption,
    pub timeout: Duration,
    pub max_retries: u32,
    pub health: S3Health,
}

/// The snapshot-store health gate's settings (spec/07, "Cold storage").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct S3Health {
    pub probe_timeout: Duration,
    pub unhealthy_ticks: u32,
    pub heal_ticks: u32,
}

impl S3Config {
    /// How long a failed cold write weighs on the health gate: as long as
    /// the S3 client can take to give up on a write (every attempt's
    /// timeout and the backoff between them), plus a flush pause.
    pub fn write_window(&self, flush_interval: Duration) -> Duration {
        let attempts = self.max_retries.saturating_add(1);
        self.timeout.saturating_mul(attempts) + Duration::from_secs(2 * u64::from(self.max_retries)) + flush_interval
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct StaticKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for StaticKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticKeys").field("access_key_id", &self.access_key_id).finish_non_exhaustive()
    }
}

pub struct S3ColdStore {
    client: aws_sdk_s3::Client,
    bucket: String,
    encryption: Encryption,
}

impl S3ColdStore {
    pub async fn connect(config: &S3Config) -> anyhow::Result<S3ColdStore> {
        let region = Region::new(config.region.clone());
        let mut builder = match &config.static_keys {
            Some(keys) => aws_sdk_s3::config::Builder::new()
                .behavior_version(BehaviorVersion::latest())
                .region(region)
                .credentials_provider(Credentials::new(
                    keys.access_key_id.clone(),
                    keys.secret_access_key.clone(),
                    keys.session_token.clone(),
                    None,
                    "storage.cold.s3",
                )),
            None => {
                let shared = aws_config::defaults(BehaviorVersion::latest()).region(region).load().await;
                aws_sdk_s3::config::Builder::from(&shared)
            }
        };
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint).force_path_style(true);
        }
        builder = builder
            // Ranged reads (`get_range`: spans, blocks, snapshot bodies) are
            // checked against the BLAKE3 digests the log records as they
            // arrive; the SDK's CRC of a whole-object GET would check the same
            // bytes a second time. `get` (staged parts, markers) asks for it.
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .timeout_config(TimeoutConfig::builder().operation_attempt_timeout(config.timeout).build())
            .retry_config(RetryConfig::standard().with_max_attempts(config.max_retries.saturating_add(1)));
        Ok(S3ColdStore {
            client: aws_sdk_s3::Client::from_conf(builder.build()),
            bucket: config.bucket.clone(),
            encryption: config.encryption.clone(),
        })
    }
}

fn failed(e: impl std::fmt::Display) -> ColdError {
    ColdError::Unavailable(e.to_string())
}

impl ColdStore for S3ColdStore {
    fn put<'a>(&'a self, key: &'a str, body: Bytes) -> ColdResult<'a, ()> {
        Box::pin(async move {
            let mut put = self.client.put_object().bucket(&self.bucket).key(key).body(ByteStream::from(body));
            put = match &self.encryption {
                Encryption::Aes256 => put.server_side_encryption(ServerSideEncryption::Aes256),
                Encryption::AwsKms { key_id } => {
                    put.server_side_encryption(ServerSideEncryption::AwsKms).set_ssekms_key_id(key_id.clone())
                }
                Encryption::None => put,
            };
            put.send().await.map_err(|e| failed(aws_sdk_s3::error::DisplayErrorContext(e)))?;
            Ok(())
        })
    }

    fn get_range<'a>(&'a self, key: &'a str, offset: u64, len: u64) -> ColdResult<'a, Bytes> {
        Box::pin(async move { Ok(super::pieces::join(self.get_range_pieces(key, offset, len, &mut |_| {}).await?)) })
    }

    fn get_range_pieces<'a>(
        &'a self,
        key: &'a str,
        offset: u64,
        len: u64,
        on_piece: OnPiece<'a>,
    ) -> ColdResult<'a, Vec<Bytes>> {
        Box::pin(async move {
            if len == 0 {
                return Ok(Vec::new());
            }
            let range = format!("bytes={offset}-{}", offset + len - 1);
            let got = self.client.get_object().bucket(&self.bucket).key(key).range(range).send().await;
            let output = match got {
                Ok(output) => output,
                Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                    return Err(ColdError::Missing(key.to_string()));
                }
                Err(e) => return Err(failed(aws_sdk_s3::error::DisplayErrorContext(e))),
            };
            // The body's segments as the HTTP client read them, not joined.
            let mut body = output.body;
            let mut pieces = Vec::new();
            while let Some(piece) = body.next().await {
                let piece = piece.map_err(failed)?;
                on_piece(&piece);
                pieces.push(piece);
            }
            if pieces.iter().map(|p| p.len() as u64).sum::<u64>() != len {
                return Err(ColdError::Corrupt(key.to_string()));
            }
            Ok(pieces)
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> ColdResult<'a, Bytes> {
        Box::pin(async move {
            let got = self
                .client
                .get_object()
                .bucket(&self.bucket)
                .key(key)
                .checksum_mode(ChecksumMode::Enabled)
                .send()
                .await;
            let output = match got {
                Ok(output) => output,
                Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                    return Err(ColdError::Missing(key.to_string()));
                }
                Err(e) => return Err(failed(aws_sdk_s3::error::DisplayErrorContext(e))),
            };
            Ok(output.body.collect().await.map_err(failed)?.into_bytes())
        })
    }

    fn delete<'a>(&'a self, key: &'a str) -> ColdResult<'a, ()> {
        Box::pin(async move {
            self.client
                .delete_object()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| failed(aws_sdk_s3::error::DisplayErrorContext(e)))?;
            Ok(())
        })
    }

    fn delete_batch<'a>(&'a self, keys: &'a [String]) -> ColdResult<'a, Vec<String>> {
        use aws_sdk_s3::types::{Delete, ObjectIdentifier};
        Box::pin(async move {
            if keys.is_empty() {
                return Ok(Vec::new());
            }
            let objects = keys
                .iter()
                .map(|k| ObjectIdentifier::builder().key(k).build())
                .collect::<Result<Vec<_>, _>>()
                .map_err(failed)?;
            let delete = Delete::builder().set_objects(Some(objects)).quiet(true).build().map_err(failed)?;
            let out = self
                .client
                .delete_objects()
                .bucket(&self.bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|e| failed(aws_sdk_s3::error::DisplayErrorContext(e)))?;
            Ok(out.errors().iter().filter_map(|e| e.key().map(str::to_string)).collect())
        })
    }

    fn size<'a>(&'a self, key: &'a str) -> ColdResult<'a, u64> {
        Box::pin(async move {
            match self.client.head_object().bucket(&self.bucket).key(key).send().await {
                Ok(head) => Ok(head.content_length().and_then(|l| u64::try_from(l).ok()).unwrap_or(0)),
                Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => {
                    Err(ColdError::Missing(key.to_string()))
                }
                Err(e) => Err(failed(aws_sdk_s3::error::DisplayErrorContext(e))),
            }
        })
    }

    fn list<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<String>> {
        Box::pin(async move { Ok(self.list_sized(prefix).await?.into_iter().map(|(k, _)| k).collect()) })
    }

    fn any_under<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, bool> {
        Box::pin(async move {
            let page = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .max_keys(1)
                .send()
                .await
                .map_err(|e| failed(aws_sdk_s3::error::DisplayErrorContext(e)))?;
            Ok(!page.contents().is_empty())
        })
    }

    fn list_sized<'a>(&'a self, prefix: &'a str) -> ColdResult<'a, Vec<(String, u64)>> {
        Box::pin(async move {
            let mut listed = Vec::new();
            let mut token: Option<String> = None;
            loop {
                let page = self
                    .client
                    .list_objects_v2()
                    .bucket(&self.bucket)
                    .prefix(prefix)
                    .set_continuation_token(token.take())
                    .send()
                    .await
                    .map_err(|e| failed(aws_sdk_s3::error::DisplayErrorContext(e)))?;
                let sized = |o: &aws_sdk_s3::types::Object| {
                    o.key().map(|k| (k.to_string(), o.size().and_then(|s| u64::try_from(s).ok()).unwrap_or(0)))
                };
                listed.extend(page.contents().iter().filter_map(sized));
                match page.next_continuation_token() {
                    Some(next) if page.is_truncated() == Some(true) => token = Some(next.to_string()),
                    _ => return Ok(listed),
                }
            }
        })
    }
}
