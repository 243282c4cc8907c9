//! Compiles `proto/angel.proto` (the PS's wire) and `proto/ballista.proto` (the Ballista
//! glue's) with protox (pure Rust), so no protoc is needed on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile(["angel.proto", "ballista.proto"], ["proto"])?;
    tonic_prost_build::configure()
        // Keys and values are packed arrays: keep them as `bytes::Bytes`, zero-copy from the wire.
        .bytes(".")
        // Sizes the encode buffer before writing, so a large payload is not copied again.
        .codec_path("crate::grpc_codec::SizedCodec")
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=proto/angel.proto");
    println!("cargo:rerun-if-changed=proto/ballista.proto");
    Ok(())
}
