//! The cluster manifest (spec/34 "Manifest format"): the nodes to reach, in
//! TOML, JSON or YAML, chosen by the file's extension or sniffed on stdin.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{CtlError, Result};

const DEFAULT_ADMIN_PORT: u16 = 4438;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub nodes: Vec<NodeEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    pub id: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_url: Option<String>,
    /// The process this manifest was pinned to (`pin-incarnations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_process_incarnation: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Toml,
    Json,
    Yaml,
}

impl Manifest {
    /// Reads the manifest at `path`, or stdin for `-`.
    pub fn load(path: &str) -> Result<Manifest> {
        if path == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| CtlError::Config(format!("reading the manifest from stdin: {e}")))?;
            return Manifest::parse(&text, sniff(&text), "stdin");
        }
        let format = match Path::new(path).extension().and_then(|e| e.to_str()) {
            Some("toml") => Format::Toml,
            Some("json") => Format::Json,
            Some("yaml" | "yml") => Format::Yaml,
            _ => return Err(CtlError::Config(format!("{path}: a manifest ends in .toml, .json, .yaml or .yml"))),
        };
        let text = std::fs::read_to_string(path).map_err(|e| CtlError::Config(format!("reading {path}: {e}")))?;
        Manifest::parse(&text, format, path)
    }

    fn parse(text: &str, format: Format, origin: &str) -> Result<Manifest> {
        let bad = |e: String| CtlError::Config(format!("{origin}: {e}"));
        let manifest: Manifest = match format {
            Format::Toml => toml::from_str(text).map_err(|e| bad(e.message().to_string()))?,
            Format::Json => serde_json::from_str(text).map_err(|e| bad(e.to_string()))?,
            Format::Yaml => serde_norway::from_str(text).map_err(|e| bad(e.to_string()))?,
        };
        manifest.validated().map_err(bad)
    }

    fn validated(mut self) -> std::result::Result<Manifest, String> {
        if self.nodes.is_empty() {
            return Err("the manifest lists no nodes".into());
        }
        let mut seen = BTreeSet::new();
        for node in &mut self.nodes {
            if node.id == 0 {
                return Err("node id 0: node ids start at 1".into());
            }
            if !seen.insert(node.id) {
                return Err(format!("node {} is listed twice", node.id));
            }
            for url in [&mut node.admin_url, &mut node.http_url, &mut node.client_url, &mut node.metrics_url]
                .into_iter()
                .flatten()
            {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("node {}: {url:?} is not an http:// or https:// URL", node.id));
                }
                while url.ends_with('/') {
                    url.pop();
                }
            }
        }
        Ok(self)
    }

    pub fn node(&self, id: u64) -> Result<&NodeEntry> {
        self.nodes
            .iter()
            .find(|n| n.id == id)
            .ok_or_else(|| CtlError::Config(format!("node {id} is not in the manifest")))
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.id).collect()
    }
}

/// JSON starts with a brace or a bracket; TOML has `[[nodes]]` or `key =`
/// lines; anything else is taken for YAML.
fn sniff(text: &str) -> Format {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') && !trimmed.starts_with("[[") {
        Format::Json
    } else if trimmed.starts_with("[[") || toml::from_str::<toml::Table>(text).is_ok() {
        Format::Toml
    } else {
        Format::Yaml
    }
}

fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next()?;
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => authority,
    };
    (!host.is_empty()).then_some(host)
}

impl NodeEntry {
    /// Where mutations go: `admin_url`, else `http://{host}:{admin_port}`.
    pub fn admin_url(&self) -> String {
        if let Some(url) = &self.admin_url {
            return url.clone();
        }
        let host = self.host.as_deref().or_else(|| self.http_url.as_deref().and_then(host_of)).unwrap_or("127.0.0.1");
        format!("http://{host}:{}", self.admin_port.unwrap_or(DEFAULT_ADMIN_PORT))
    }

    /// Where metrics and readiness are read: `metrics_url`, else
    /// `client_url`, else the admin plane (never the Raft `http_url`).
    pub fn metrics_url(&self) -> String {
        self.metrics_url.clone().or_else(|| self.client_url.clone()).unwrap_or_else(|| self.admin_url())
    }

    /// The address reports show.
    pub fn host(&self) -> String {
        if let Some(host) = &self.host {
            return host.clone();
        }
        let url = self.http_url.clone().unwrap_or_else(|| self.admin_url());
        host_of(&url).unwrap_or("?").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
[[nodes]]
id = 1
admin_url = "http://127.0.0.1:5441/"

[[nodes]]
id = 2
http_url = "http://10.0.0.2:4437"
client_url = "http://10.0.0.2:4437"
"#;

    #[test]
    fn the_three_formats_read_the_same_manifest() {
        let toml = Manifest::parse(TOML, Format::Toml, "t").expect("toml");
        let json = r#"{"nodes":[{"id":1,"admin_url":"http://127.0.0.1:5441"},
            {"id":2,"http_url":"http://10.0.0.2:4437","client_url":"http://10.0.0.2:4437"}]}"#;
        let yaml = "nodes:\n  - id: 1\n    admin_url: http://127.0.0.1:5441\n  - id: 2\n    \
                    http_url: http://10.0.0.2:4437\n    client_url: http://10.0.0.2:4437\n";
        assert_eq!(Manifest::parse(json, Format::Json, "j").expect("json"), toml);
        assert_eq!(Manifest::parse(yaml, Format::Yaml, "y").expect("yaml"), toml);
        for text in [TOML, json, yaml] {
            assert_eq!(Manifest::parse(text, sniff(text), "stdin").expect("sniffed"), toml);
        }
    }

    #[test]
    fn addresses_fall_back_as_the_spec_says() {
        let m = Manifest::parse(TOML, Format::Toml, "t").expect("toml");
        let (one, two) = (m.node(1).expect("1"), m.node(2).expect("2"));
        assert_eq!(one.admin_url(), "http://127.0.0.1:5441", "trailing slash dropped");
        assert_eq!(one.metrics_url(), "http://127.0.0.1:5441", "no metrics or client url: the admin plane");
        assert_eq!(two.admin_url(), "http://10.0.0.2:4438", "the http_url's host on the default admin port");
        assert_eq!(two.metrics_url(), "http://10.0.0.2:4437", "the client plane before the admin plane");
        assert_eq!((one.host(), two.host()), ("127.0.0.1".to_string(), "10.0.0.2".to_string()));
    }

    #[test]
    fn a_bad_manifest_is_refused_with_its_cause() {
        let refused = |text: &str| match Manifest::parse(text, Format::Toml, "m.toml") {
            Err(CtlError::Config(why)) => why,
            other => panic!("accepted: {other:?}"),
        };
        assert!(refused("nodes = []").contains("no nodes"));
        assert!(refused("[[nodes]]\nid = 1\n[[nodes]]\nid = 1\n").contains("twice"));
        assert!(refused("[[nodes]]\nid = 1\nadmin_url = \"127.0.0.1:1\"\n").contains("not an http"));
        assert!(refused("[[nodes]]\nid = 1\nadmin_prot = 1\n").contains("admin_prot"));
    }
}
