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

/// One sized preset's TOML layer.
macro_rules! sized {
    ($groups:literal, $cache:literal, $flush:literal, $writes:literal, $caps:literal, $bodies:literal) => {
        concat!(
            "[server]\nhttp_inflight_body_size = \"",
            $bodies,
            "\"\n[raft]\ngroup_count = ",
            $groups,
            "\nmax_uncommitted_size_per_group = \"",
            $caps,
            "\"\n[storage.cold]\ncache_size = \"",
            $cache,
            "\"\nflush_size = \"",
            $flush,
            "\"\nflush_max_concurrency = ",
            $writes,
            "\nmax_hot_size_per_group = \"",
            $caps,
            "\"\n"
        )
    };
}

impl Preset {
    /// `default` and `dev` run the in-memory engine without Raft.
    pub fn in_memory(self) -> bool {
        matches!(self, Preset::Default | Preset::Dev)
    }

    /// The preset's layer (spec/07's table): groups, cold cache, cold flush
    /// size, cold writes in flight, the hot and admission caps per group
    /// and the HTTP in-flight body budget of each size. The cold keys take
    /// effect only with a cold backend.
    pub fn layer(self) -> &'static str {
        match self {
            Preset::Default | Preset::Dev => "",
            Preset::Tiny => sized!(64, "64MiB", "4MiB", 2, "8MiB", "64MiB"),
            Preset::Small => sized!(128, "64MiB", "4MiB", 2, "16MiB", "64MiB"),
            Preset::Standard => sized!(256, "256MiB", "8MiB", 4, "64MiB", "256MiB"),
            Preset::Large => sized!(512, "512MiB", "16MiB", 8, "128MiB", "512MiB"),
        }
    }
}
