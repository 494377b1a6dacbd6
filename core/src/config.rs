//! Node configuration: a TOML file (`--config`, else `./ursula.toml`, else
//! `/etc/ursula/ursula.toml`) under CLI overrides (spec/07-configuration.md).
//! Unknown keys and invalid values refuse startup, naming the key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use ursula_gateway::JsonReads;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub protocol: ProtocolSection,
    #[serde(default)]
    pub runtime: RuntimeSection,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSection {
    /// Worker threads; defaults to the available parallelism.
    pub core_count: Option<usize>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Option<String>,
    /// Names the deployment in `Ursula-Cluster-Id`.
    pub cluster_id: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolSection {
    /// `ndjson` (the spec's form) or `array` (older clients).
    pub json_reads: Option<String>,
}

/// The validated settings a node runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    pub listen: SocketAddr,
    pub json_reads: JsonReads,
    pub group_count: u32,
    pub cluster_id: String,
    pub core_count: usize,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:4437";
/// Groups of the in-memory engine of the `default` preset.
pub const DEFAULT_GROUP_COUNT: u32 = 16;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid value for {key}: {value:?} ({expected})")]
    Value { key: &'static str, value: String, expected: &'static str },
}

/// Overrides from the command line, which win over the file.
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    pub config: Option<PathBuf>,
    pub listen: Option<String>,
    pub json_reads: Option<String>,
}

/// The file to load: the one named, else the first of the search path that exists.
fn config_path(named: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = named {
        return Some(p.to_path_buf());
    }
    ["ursula.toml", "/etc/ursula/ursula.toml"].iter().map(PathBuf::from).find(|p| p.is_file())
}

pub fn load(cli: &CliOverrides) -> Result<NodeConfig, ConfigError> {
    let file = match config_path(cli.config.as_deref()) {
        None => FileConfig::default(),
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).map_err(|source| ConfigError::Read { path: path.clone(), source })?;
            parse_file(&text).map_err(|message| ConfigError::Parse { path, message })?
        }
    };
    resolve(file, cli)
}

pub fn parse_file(text: &str) -> Result<FileConfig, String> {
    toml::from_str(text).map_err(|e| e.message().to_string())
}

pub fn resolve(file: FileConfig, cli: &CliOverrides) -> Result<NodeConfig, ConfigError> {
    let listen_text = cli.listen.clone().or(file.server.listen).unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let listen = listen_text.parse().map_err(|_| ConfigError::Value {
        key: "server.listen",
        value: listen_text.clone(),
        expected: "host:port, e.g. 127.0.0.1:4437",
    })?;
    let json_text = cli.json_reads.clone().or(file.protocol.json_reads);
    let json_reads = match json_text {
        None => JsonReads::default(),
        Some(v) => JsonReads::parse(&v).ok_or(ConfigError::Value {
            key: "protocol.json_reads",
            value: v,
            expected: "ndjson or array",
        })?,
    };
    let cluster_id = match file.server.cluster_id {
        Some(id) if valid_cluster_id(&id) => id,
        Some(id) => {
            return Err(ConfigError::Value {
                key: "server.cluster_id",
                value: id,
                expected: "1 to 64 of A-Z a-z 0-9 . _ -",
            });
        }
        // A single node without one generates `u` + 32 hex digits (extensions §10).
        None => format!("u{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)),
    };
    let core_count = match file.runtime.core_count {
        Some(0) => {
            return Err(ConfigError::Value { key: "runtime.core_count", value: "0".into(), expected: "at least 1" });
        }
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, usize::from),
    };
    Ok(NodeConfig { listen, json_reads, group_count: DEFAULT_GROUP_COUNT, cluster_id, core_count })
}

fn valid_cluster_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_development_node() {
        let cfg = resolve(FileConfig::default(), &CliOverrides::default()).expect("valid");
        assert_eq!(cfg.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(cfg.json_reads, JsonReads::Ndjson);
    }

    #[test]
    fn cli_wins_over_file() {
        let file =
            parse_file("[server]\nlisten = \"127.0.0.1:9000\"\n[protocol]\njson_reads = \"array\"\n").expect("valid");
        let cli = CliOverrides { listen: Some("127.0.0.1:0".into()), ..Default::default() };
        let cfg = resolve(file, &cli).expect("valid");
        assert_eq!(cfg.listen.port(), 0);
        assert_eq!(cfg.json_reads, JsonReads::Array);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_by_name() {
        let err = parse_file("[server]\nlisten_addr = \"x\"\n").expect_err("unknown key");
        assert!(err.contains("listen_addr"), "{err}");
        let file = parse_file("[protocol]\njson_reads = \"xml\"\n").expect("parses");
        let err = resolve(file, &CliOverrides::default()).expect_err("bad value").to_string();
        assert!(err.contains("protocol.json_reads"), "{err}");
    }
}
