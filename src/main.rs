use std::process::ExitCode;

// See Cargo.toml: under load the allocator is a visible share of a request's cost.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    idem::cli::run().await
}
