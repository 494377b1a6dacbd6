//! Resource presets (spec/07-configuration.md, "Resource presets"): a base
//! layer under the config file. Each is TOML, merged like a file, so a
//! preset can set nothing a file could not.

use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Default,
    Dev,
    Tiny,
    Small,
    Standard,
    Large,
}

impl FromStr for Preset {
    type Err = ();
    fn from_str(s: &str) -> Result<Preset, ()> {
        Ok(match s {
            "default" => Preset::Default,
            "dev" => Preset::Dev,
            "tiny" => Preset::Tiny,
            "small" => Preset::Small,
            "standard" => Preset::Standard,
            "large" => Preset::Large,
            _ => return Err(()),
        })
    }
}

impl Preset {
    /// `default` and `dev` run the in-memory engine without Raft.
    pub fn in_memory(self) -> bool {
        matches!(self, Preset::Default | Preset::Dev)
    }

    /// The preset's layer: the group count of each size, and the smaller
    /// body budget of `tiny` and `small` (every other key keeps its
    /// documented default).
    pub fn layer(self) -> &'static str {
        match self {
            Preset::Default | Preset::Dev => "",
            Preset::Tiny => "[server]\nhttp_inflight_body_size = \"64MiB\"\n[raft]\ngroup_count = 64\n",
            Preset::Small => "[server]\nhttp_inflight_body_size = \"64MiB\"\n[raft]\ngroup_count = 128\n",
            Preset::Standard => "[raft]\ngroup_count = 256\n",
            Preset::Large => "[raft]\ngroup_count = 512\n",
        }
    }
}
