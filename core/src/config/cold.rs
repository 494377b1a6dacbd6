//! `[storage.cold]` and `[storage.cold.s3]` resolved into `ColdConfig`,
//! with the startup refusals of spec/07.

use std::time::Duration;

use super::ConfigError;
use super::file::ColdSection;
use crate::cold::s3::{Encryption, S3Config, S3Health, StaticKeys};
use crate::cold::{ColdBackend, ColdConfig};

pub(super) fn duration(key: &'static str, text: Option<String>, default: Duration) -> Result<Duration, ConfigError> {
    match text {
        None => Ok(default),
        Some(t) => ursula_http::options::parse_duration(&t).ok_or(ConfigError::Value {
            key,
            value: t,
            expected: "a duration such as 1s, 500ms or 5m",
        }),
    }
}

/// `None` when `backend` is unset or `none`.
pub fn resolve(section: ColdSection, external_payload_min_size: u64) -> Result<Option<ColdConfig>, ConfigError> {
    let refuse = |key, message: &str| Err(ConfigError::Refused { key, message: message.to_string() });
    let backend = match section.backend.as_deref() {
        None | Some("none") => return Ok(None),
        Some("memory") => ColdBackend::Memory,
        Some("s3") => {
            let s3 = section.s3;
            let Some(bucket) = s3.bucket.filter(|b| !b.is_empty()) else {
                return Err(ConfigError::Startup(
                    "storage.cold.s3.bucket is required when cold backend is 's3'".into(),
                ));
            };
            let static_keys = match (s3.access_key_id, s3.secret_access_key) {
                (Some(access_key_id), Some(secret_access_key)) => {
                    Some(StaticKeys { access_key_id, secret_access_key, session_token: s3.session_token })
                }
                (None, None) => None,
                _ => {
                    return refuse(
                        "storage.cold.s3.access_key_id",
                        "set both access_key_id and secret_access_key, or neither (the credential chain)",
                    );
                }
            };
            let encryption = match (s3.server_side_encryption.as_deref(), s3.kms_key_id) {
                (None | Some("aes256"), None) => Encryption::Aes256,
                (Some("aws-kms"), key_id) => Encryption::AwsKms { key_id },
                (Some("none"), None) => Encryption::None,
                (Some(other), None) if !matches!(other, "aes256" | "aws-kms" | "none") => {
                    return Err(ConfigError::Value {
                        key: "storage.cold.s3.server_side_encryption",
                        value: other.to_string(),
                        expected: "aes256, aws-kms or none",
                    });
                }
                _ => {
                    return refuse(
                        "storage.cold.s3.kms_key_id",
                        "only valid with server_side_encryption = \"aws-kms\"",
                    );
                }
            };
            ColdBackend::S3(Box::new(S3Config {
                bucket,
                region: s3.region.unwrap_or_else(|| "us-east-1".into()),
                endpoint: s3.endpoint,
                static_keys,
                encryption,
                timeout: duration("storage.cold.s3.timeout", s3.timeout, Duration::from_secs(10))?,
                max_retries: s3.max_retries.unwrap_or(3),
                health: S3Health {
                    probe_timeout: nonzero_duration("storage.cold.s3.probe_timeout", s3.probe_timeout, 5)?,
                    unhealthy_ticks: nonzero_count("storage.cold.s3.unhealthy_ticks", s3.unhealthy_ticks, 3)?,
                    heal_ticks: nonzero_count("storage.cold.s3.heal_ticks", s3.heal_ticks, 2)?,
                },
            }))
        }
        Some(other) => {
            return Err(ConfigError::Value {
                key: "storage.cold.backend",
                value: other.to_string(),
                expected: "none, memory or s3",
            });
        }
    };
    let flush_interval = duration("storage.cold.flush_interval", section.flush_interval, Duration::from_secs(1))?;
    if flush_interval.is_zero() {
        return refuse("storage.cold.flush_interval", "must be non-zero");
    }
    let flush_size = section.flush_size.map_or(8 * 1024 * 1024, |s| s.0);
    let flush_max_size = section.flush_max_size.map_or(flush_size, |s| s.0);
    if flush_max_size == 0 {
        return refuse("storage.cold.flush_max_size", "must be more than 0");
    }
    Ok(Some(ColdConfig {
        backend,
        root: section.root.unwrap_or_default(),
        flush_interval,
        flush_size,
        flush_min_hot_size: section.flush_min_hot_size.map_or(flush_size, |s| s.0),
        flush_max_size,
        flush_max_concurrency: section.flush_max_concurrency.unwrap_or(4).max(1),
        max_hot_size_per_group: section.max_hot_size_per_group.map_or(64 * 1024 * 1024, |s| s.0),
        cache_size: section.cache_size.map_or(256 * 1024 * 1024, |s| s.0),
        flush_max_hot_age: duration(
            "storage.cold.flush_max_hot_age",
            section.flush_max_hot_age,
            Duration::from_secs(300),
        )?,
        gc_grace: duration("storage.cold.gc_grace", section.gc_grace, Duration::from_secs(300))?,
        parts_grace: duration("storage.cold.parts_grace", section.parts_grace, Duration::from_secs(86_400))?,
        external_payload_min_size,
        compaction_enabled: section.compaction_enabled.unwrap_or(true),
    }))
}

fn nonzero_duration(key: &'static str, text: Option<String>, default_secs: u64) -> Result<Duration, ConfigError> {
    let value = duration(key, text, Duration::from_secs(default_secs))?;
    if value.is_zero() {
        return Err(ConfigError::Refused { key, message: "must be non-zero".into() });
    }
    Ok(value)
}

fn nonzero_count(key: &'static str, value: Option<u32>, default: u32) -> Result<u32, ConfigError> {
    match value.unwrap_or(default) {
        0 => Err(ConfigError::Refused { key, message: "must be non-zero".into() }),
        n => Ok(n),
    }
}
