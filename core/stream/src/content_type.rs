//! Content types, normalized once so that comparisons are exact
//! (spec/27-append.md: "parameters are trimmed, lowercased and joined with `; `").

use std::borrow::Cow;
use std::fmt;

/// A normalized MIME type: `type/subtype` lowercased, parameters trimmed,
/// lowercased and joined with `; `. The common types borrow a static
/// string, so the many streams that share one cost no allocation.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, Hash)]
pub struct ContentType(Cow<'static, str>);

const COMMON: &[&str] = &[
    OCTET_STREAM,
    "application/json",
    "application/json; charset=utf-8",
    "application/x-ndjson",
    "application/ndjson",
    "application/x-protobuf",
    "text/plain",
    "text/plain; charset=utf-8",
    "text/event-stream",
    "text/markdown",
    "text/html",
];

/// The default of a stream created without `Content-Type` (spec/13-streams.md).
pub const OCTET_STREAM: &str = "application/octet-stream";

impl ContentType {
    /// Normalizes a header value; `None` when it is not `type/subtype[; params]`.
    pub fn parse(raw: &str) -> Option<ContentType> {
        // Most requests name a common type already in normal form: no allocation.
        if let Some(common) = COMMON.iter().find(|c| **c == raw) {
            return Some(ContentType(Cow::Borrowed(common)));
        }
        let mut parts = raw.split(';');
        let essence = parts.next()?.trim().to_ascii_lowercase();
        let (kind, sub) = essence.split_once('/')?;
        if !is_token(kind) || !is_token(sub) {
            return None;
        }
        let mut out = essence.clone();
        for param in parts {
            let param = param.trim();
            if param.is_empty() {
                continue;
            }
            out.push_str("; ");
            out.push_str(&param.to_ascii_lowercase());
        }
        Some(match COMMON.iter().find(|c| **c == out) {
            Some(common) => ContentType(Cow::Borrowed(common)),
            None => ContentType(Cow::Owned(out)),
        })
    }

    pub fn octet_stream() -> ContentType {
        ContentType(Cow::Borrowed(OCTET_STREAM))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `type/subtype` without parameters.
    pub fn essence(&self) -> &str {
        // A byte scan: asked several times per append, on short values.
        let end = self.0.bytes().position(|b| b == b';').unwrap_or(self.0.len());
        self.0.get(..end).unwrap_or(&self.0)
    }

    /// JSON mode applies to `application/json` with or without parameters.
    pub fn is_json(&self) -> bool {
        self.essence() == "application/json"
    }

    /// `text/*`: bodies must be UTF-8 (base protocol §5.8, spec/27).
    pub fn is_text_family(&self) -> bool {
        self.essence().starts_with("text/")
    }

    /// Streams whose SSE data travels as UTF-8 text rather than base64.
    pub fn is_text(&self) -> bool {
        self.is_json() || self.essence().starts_with("text/")
    }
}

impl fmt::Display for ContentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_types_are_already_in_normal_form() {
        // `parse` answers a common type as it came: it must be what the
        // normalization makes of it.
        for common in COMMON {
            let upper = common.to_ascii_uppercase().replace("; ", " ;  ");
            assert_eq!(ContentType::parse(&upper).as_ref().map(ContentType::as_str), Some(*common));
            assert!(matches!(ContentType::parse(common), Some(ContentType(Cow::Borrowed(c))) if c == *common));
        }
    }

    #[test]
    fn normalizes_case_and_parameter_spacing() {
        let table = [
            ("application/json", Some("application/json")),
            ("Application/JSON", Some("application/json")),
            ("text/plain;charset=UTF-8", Some("text/plain; charset=utf-8")),
            (" text/plain ;  charset=utf-8 ; a=b", Some("text/plain; charset=utf-8; a=b")),
            ("text/plain;", Some("text/plain")),
            ("application/vnd.api+json", Some("application/vnd.api+json")),
            ("", None),
            ("json", None),
            ("/json", None),
            ("application/", None),
            ("a b/c", None),
        ];
        for (input, expected) in table {
            assert_eq!(ContentType::parse(input).as_ref().map(ContentType::as_str), expected, "input {input:?}");
        }
    }

    #[test]
    fn json_and_text_modes_follow_the_essence() {
        let json = ContentType::parse("application/json; charset=utf-8").expect("valid");
        assert!(json.is_json() && json.is_text());
        let text = ContentType::parse("text/markdown").expect("valid");
        assert!(!text.is_json() && text.is_text());
        let ndjson = ContentType::parse("application/x-ndjson").expect("valid");
        assert!(!ndjson.is_json() && !ndjson.is_text());
    }
}
