//! A settings file the gateway serves from and reloads without a restart
//! (the access policy, the quota policy): reloaded on `SIGHUP` and when the
//! file changes, swapped whole so a request keeps what it was admitted
//! with; a file that does not load keeps the one in force and logs a line.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

/// How often the file's modification time and length are looked at.
const POLL: Duration = Duration::from_secs(1);

pub struct Watched<T> {
    what: &'static str,
    path: PathBuf,
    load: fn(&Path) -> anyhow::Result<T>,
    current: RwLock<Arc<T>>,
    /// The file's modification time and length when last read.
    seen: Mutex<Option<(SystemTime, u64)>>,
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl<T: Send + Sync + 'static> Watched<T> {
    /// Loads the file; one that does not load refuses the start.
    pub fn open(what: &'static str, path: PathBuf, load: fn(&Path) -> anyhow::Result<T>) -> anyhow::Result<Arc<Self>> {
        let seen = stamp(&path);
        let value = load(&path)?;
        Ok(Arc::new(Watched { what, path, load, current: RwLock::new(Arc::new(value)), seen: Mutex::new(seen) }))
    }

    pub fn current(&self) -> Arc<T> {
        self.current.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the file again; one that does not load keeps the one in force.
    pub fn reload(&self) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = stamp(&self.path);
        match (self.load)(&self.path) {
            Ok(value) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(value);
                tracing::info!(path = %self.path.display(), "reloaded the {}", self.what);
            }
            Err(e) => tracing::warn!("kept the {} in force: {e:#}", self.what),
        }
    }

    /// Reloads on `SIGHUP` and when the file changes.
    pub fn watch(self: Arc<Self>) {
        let on_hangup = self.clone();
        tokio::spawn(async move {
            let Ok(mut hangups) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
                return;
            };
            while hangups.recv().await.is_some() {
                on_hangup.reload();
            }
        });
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL);
            loop {
                tick.tick().await;
                let changed = stamp(&self.path) != *self.seen.lock().unwrap_or_else(|p| p.into_inner());
                if changed {
                    self.reload();
                }
            }
        });
    }
}
