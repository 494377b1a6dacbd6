use std::path::PathBuf;

/// Every message is one line naming the file (and offset) concerned: an
/// operator reads them at startup.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("WAL {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("WAL segment {segment} is corrupt at byte {offset}: {reason}")]
    Corrupt { segment: PathBuf, offset: u64, reason: String },
    #[error("WAL directory {dir} is in use by another process (lock {lock} is held)")]
    Locked { dir: PathBuf, lock: PathBuf },
    #[error("invalid WAL option: {0}")]
    Options(String),
    #[error("invalid WAL request: {0}")]
    Invalid(String),
    #[error("WAL writer failed on {path} and accepts nothing more (reopen to recover): {reason}")]
    Broken { path: PathBuf, reason: String },
    #[error("Wal::{0} called from a WAL callback (the writer thread): it would wait for itself")]
    OnWriterThread(&'static str),
    #[error("the WAL is closed")]
    Closed,
}

impl WalError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WalError {
        let path = path.into();
        move |source| WalError::Io { path, source }
    }
}
