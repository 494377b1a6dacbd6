//! What can stop a verb, and the exit code each one means (spec/34):
//! `2` an abort the operator should look at (no safe target, a timeout, a
//! stalled catch-up), `1` anything else (configuration, transport, a
//! server's refusal).

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// The manifest or the arguments are wrong.
    #[error("config: {0}")]
    Config(String),
    /// A node did not answer, or answered what this tool cannot read.
    #[error("transport: {0}")]
    Transport(String),
    /// A node restarted since this invocation (or the pinned manifest) observed it.
    #[error("process changed: {0}")]
    ProcessChanged(String),
    /// A node refused a request.
    #[error("refused: {0}")]
    Refused(String),
    /// The operation stopped to keep the cluster safe, or ran out of time.
    #[error("abort: {0}")]
    Abort(String),
}

impl CtlError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CtlError::Abort(_) => 2,
            _ => 1,
        }
    }

    /// One machine-greppable line: `ursulactl: <kind>: <message>`.
    pub fn line(&self) -> String {
        format!("ursulactl: {}", self.to_string().replace(['\n', '\r'], " "))
    }
}

pub type Result<T> = std::result::Result<T, CtlError>;
