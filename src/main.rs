use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    idem::cli::run().await
}
