//! The `angel-ps` command; everything lives in the library's `cli` module.

fn main() -> std::process::ExitCode {
    angel_ps::cli::main()
}
