use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("WAL {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("WAL segment {segment} is corrupt at byte {offset}: {reason}")]
    Corrupt { segment: PathBuf, offset: u64, reason: String },
    #[error("invalid WAL option: {0}")]
    Options(String),
    #[error("the WAL is closed")]
    Closed,
}

impl WalError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> WalError {
        let path = path.into();
        move |source| WalError::Io { path, source }
    }
}
