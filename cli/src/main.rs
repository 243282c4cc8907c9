//! The `angel-ps` command; everything lives in this crate's library.

// Bulk pulls and pushes allocate tens of megabytes per request. The system allocator maps and
// unmaps such blocks each time, so every request pays page faults on fresh memory; mimalloc
// keeps them for reuse.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    angel_ps_cli::main()
}
