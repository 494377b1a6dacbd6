//! Generates the gRPC code with the `protoc` shipped by `protoc-bin-vendored`,
//! so a fresh machine needs nothing installed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: a build script is single-threaded; nothing reads the
    // environment while it is written.
    unsafe { std::env::set_var("PROTOC", protoc) };
    // Stream payloads decode as `Bytes`, sharing the request buffer; Raft
    // entries are sent as the `Bytes` they were encoded into (no copy).
    tonic_prost_build::configure()
        .bytes(".ursula.stream.v1")
        .bytes(".ursula.raft.v1.AppendEntriesRequest.entries")
        .compile_protos(&["ursula/raft/v1/raft.proto", "ursula/stream/v1/stream.proto"], &["."])?;
    println!("cargo:rerun-if-changed=ursula");
    Ok(())
}
