//! This process's identity (`process_incarnation` of `/__ursula/metrics`),
//! which admin mutations must name (`x-ursula-process-incarnation`).

use std::sync::OnceLock;

/// This process's identity, drawn once at startup.
pub fn process_incarnation() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| format!("{:016x}", fastrand::u64(..)))
}
