//! Query parameters of a stream read. Unknown parameters are ignored, as the
//! base protocol says; a known one given twice makes the read ambiguous and
//! is refused (`offset` as `INVALID_OFFSET`, the others as `INVALID_QUERY`).

use ursula_stream::ReadFrom;

use crate::error::ApiError;
use crate::limits::{DEFAULT_LONG_POLL_MS, MAX_LONG_POLL_MS, MAX_RESPONSE_BYTES};

/// The parameters a read takes; each at most once.
const KNOWN: &[&str] = &["offset", "live", "cursor", "timeout_ms", "max_bytes", "consistency"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveMode {
    CatchUp,
    LongPoll,
    Sse,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadParams {
    /// `None` when the request named no offset.
    pub offset: Option<ReadFrom>,
    pub live: LiveMode,
    pub cursor: Option<String>,
    pub timeout_ms: u64,
    pub max_bytes: u64,
    /// `consistency=leader`: a linearizable read (extensions §9.2).
    pub consistency_leader: bool,
}

impl ReadParams {
    pub fn parse(query: Option<&str>) -> Result<ReadParams, ApiError> {
        let mut offset: Option<ReadFrom> = None;
        let mut seen: Vec<String> = Vec::new();
        let mut live = LiveMode::CatchUp;
        let mut cursor = None;
        let mut timeout_ms = DEFAULT_LONG_POLL_MS;
        let mut max_bytes = MAX_RESPONSE_BYTES;
        let mut consistency_leader = false;
        for (name, value) in pairs(query.unwrap_or("")) {
            if KNOWN.contains(&name.as_str()) {
                if seen.contains(&name) {
                    return Err(match name.as_str() {
                        "offset" => ApiError::InvalidOffset,
                        _ => ApiError::InvalidQuery(format!("{name} appears more than once")),
                    });
                }
                seen.push(name.clone());
            }
            match name.as_str() {
                "offset" => {
                    offset = Some(ReadFrom::parse(&value).ok_or(ApiError::InvalidOffset)?);
                }
                "live" => {
                    live = match value.as_str() {
                        "long-poll" => LiveMode::LongPoll,
                        "sse" => LiveMode::Sse,
                        _ => return Err(ApiError::InvalidQuery("live must be long-poll or sse".into())),
                    }
                }
                "cursor" => cursor = Some(value),
                "timeout_ms" => {
                    if let Ok(t) = value.parse::<u64>() {
                        timeout_ms = t.clamp(1, MAX_LONG_POLL_MS);
                    }
                }
                "max_bytes" => {
                    if let Ok(n) = value.parse::<u64>() {
                        max_bytes = n.clamp(1, MAX_RESPONSE_BYTES);
                    }
                }
                "record" | "tail_records" | "max_records" | "record_view" => {
                    return Err(ApiError::InvalidQuery(format!("{name} was removed in 0.6.0; resume from offsets")));
                }
                "incarnation" | "aligned" => {
                    return Err(ApiError::Unsupported(format!(
                        "{name} is not a query parameter; immutable reads carry it in the path: {{stream}}/incarnation/{{token}}/chunk/{{offset}}"
                    )));
                }
                "consistency" => match value.as_str() {
                    "local" => consistency_leader = false,
                    "leader" => consistency_leader = true,
                    _ => return Err(ApiError::InvalidQuery("consistency must be local or leader".into())),
                },
                _ => {}
            }
        }
        if consistency_leader && live != LiveMode::CatchUp {
            return Err(ApiError::InvalidQuery("consistency=leader cannot be combined with live".into()));
        }
        if live != LiveMode::CatchUp && offset.is_none() {
            return Err(ApiError::InvalidQuery("live reads need an offset".into()));
        }
        Ok(ReadParams { offset, live, cursor, timeout_ms, max_bytes, consistency_leader })
    }
}

/// Percent-decoded `name=value` pairs (`+` is a space, as in forms).
fn pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').filter(|p| !p.is_empty()).map(|pair| {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(name), decode(value))
    })
}

fn decode(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ursula_stream::Offset;

    #[test]
    fn offsets_and_modes() {
        let p = ReadParams::parse(Some("offset=00000000000000000005&live=sse&foo=bar")).expect("valid");
        assert_eq!((p.offset, p.live), (Some(ReadFrom::At(Offset(5))), LiveMode::Sse));
        assert_eq!(ReadParams::parse(None).map(|p| p.offset), Ok(None));
        for bad in [
            "offset=",
            "offset=0,1",
            "offset=0%201",
            "offset=-1&offset=-1",
            "live=sse",
            "live=long-poll",
            "live=x&offset=-1",
            "offset=-1&consistency=leader&live=sse",
            "offset=-1&consistency=leader&live=sse&consistency=local",
            "offset=-1&live=sse&live=long-poll",
            "offset=-1&max_bytes=1&max_bytes=2",
            "offset=-1&timeout_ms=1&timeout_ms=2",
            "offset=-1&cursor=a&cursor=b",
            "consistency=weird",
        ] {
            assert!(ReadParams::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn timeout_and_max_bytes_are_clamped_or_ignored() {
        let p = ReadParams::parse(Some("offset=-1&live=long-poll&timeout_ms=999999&max_bytes=0")).expect("valid");
        assert_eq!((p.timeout_ms, p.max_bytes), (MAX_LONG_POLL_MS, 1));
        let p = ReadParams::parse(Some("timeout_ms=abc&max_bytes=-3")).expect("valid");
        assert_eq!((p.timeout_ms, p.max_bytes), (DEFAULT_LONG_POLL_MS, MAX_RESPONSE_BYTES));
    }
}
