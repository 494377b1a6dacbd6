//! A fault the engine's tests inject: a command to a bucket they name
//! fails to apply, as a state-machine bug would (test builds only).

use std::sync::Mutex;

static FAILING_BUCKETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub fn fail_bucket(bucket: &str) {
    FAILING_BUCKETS.lock().unwrap_or_else(|p| p.into_inner()).push(bucket.to_owned());
}

pub fn check(command: &ursula_stream::Command) {
    let bucket = match command {
        ursula_stream::Command::Create(c) => c.key.bucket.as_str(),
        ursula_stream::Command::Append(a) => a.key.bucket.as_str(),
        _ => return,
    };
    if FAILING_BUCKETS.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|b| b == bucket) {
        panic!("an injected apply fault for bucket {bucket}");
    }
}
