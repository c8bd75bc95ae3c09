//! The command line: `serve`, `migrate`, `keys`, `users`, `tools`, `mcp-proxy`,
//! `sandbox-provider`, `sandbox-mcp`.

use anyhow::{bail, Context};
use app::audit::{AuditLog, PersonAction};
use app::identity::{Identity, IdentityPolicy};
use clap::{Parser, Subcommand};
use serde_json::Value;
use std::io::BufRead;
use std::process::ExitCode;

use crate::config::{DatabaseArgs, ServeConfig};
use crate::sandbox::Sandbox;
use crate::startup::Application;
use crate::storage::Database;
use crate::telemetry;
use keys::{keys, KeysCommand};
use tools::{tools, ToolsCommand};
use users::{users, UsersCommand};

mod keys;
mod tools;
mod users;

/// idem — the idempotency ledger for tool-calling AI agents.
#[derive(Debug, Parser)]
#[command(name = "idem", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the REST API and the web UI.
    Serve(ServeConfig),
    /// Create or upgrade the database schema, then exit.
    Migrate(DatabaseArgs),
    /// Manage the API keys agents use.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Manage the people who use the web UI.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Run the sandbox provider: a fake payments/email service with idempotency keys,
    /// lookups and fault injection, for tests and demos.
    SandboxProvider {
        /// Where to listen (port 0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:4000")]
        bind: String,
    },
    /// Put idem's ledger in front of an MCP server's tools: serves MCP to the host on stdio,
    /// forwards to the upstream, and sends every tools/call through idem (claim, act, report).
    McpProxy(crate::mcp::ProxyArgs),
    /// Manage idem's tool registry.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Run the sandbox MCP server on stdio (or streamable HTTP): tools of every effect class
    /// that append each effect to a file, for tests and demos.
    SandboxMcp {
        /// Where each effect is appended as one line `tool arguments`.
        #[arg(long)]
        effects_file: std::path::PathBuf,
        /// Serve over streamable HTTP on this address (endpoint `/mcp`) instead of stdio.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
    },
}

/// Parses the command line and runs it.
pub async fn run() -> ExitCode {
    let cli = Cli::parse();
    match execute(cli.command).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn execute(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(config) => {
            telemetry::init(config.log_format == "json");
            Application::build(config).await?.run().await?;
        }
        Command::Migrate(database) => {
            telemetry::init(false);
            open(&database).await?.close().await;
            println!("the database schema is up to date");
        }
        Command::Keys(command) => {
            telemetry::init(false);
            keys(command).await?;
        }
        Command::Users(command) => {
            telemetry::init(false);
            users(command).await?;
        }
        Command::SandboxProvider { bind } => {
            telemetry::init(false);
            let sandbox = Sandbox::bind(bind.as_str())
                .await
                .with_context(|| format!("binding {bind}"))?;
            // On stdout, alone on its line, so scripts and tests can read the port.
            println!(
                "sandbox provider listening on http://{}",
                sandbox.local_addr()
            );
            sandbox.run().await?;
        }
        Command::McpProxy(args) => crate::mcp::run_proxy(args).await?,
        Command::Tools(command) => {
            telemetry::init(false);
            tools(command).await?;
        }
        Command::SandboxMcp {
            effects_file,
            listen,
        } => {
            crate::mcp::sandbox::SandboxMcp::run(effects_file, listen).await?;
        }
    }
    Ok(())
}

async fn open(args: &DatabaseArgs) -> anyhow::Result<Database> {
    Database::open(&args.database_url)
        .await
        .with_context(|| format!("opening {}", redact_url(&args.database_url)))
}

pub(crate) async fn identity(args: &DatabaseArgs) -> anyhow::Result<(Database, Identity)> {
    let database = open(args).await?;
    let identity = Identity::new(database.identity_store(), IdentityPolicy::default());
    Ok((database, identity))
}

/// Writes what the command line did to the audit log, as actor `cli` with no address (whoever
/// runs it already has the database).
pub(crate) async fn audit(db: &Database, action: &'static str, subject: String, detail: Value) {
    let log = AuditLog::new(db.audit_store());
    log.record(PersonAction {
        actor: "cli".into(),
        address: None,
        action,
        subject,
        detail,
    })
    .await;
}

/// The first line of stdin, without its line ending.
pub(crate) fn read_password() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("reading the password from stdin")?;
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.is_empty() {
        bail!("no password on stdin");
    }
    Ok(password)
}

/// The URL without its password, for messages.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let credentials = &url[scheme_end + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => {
                    format!("{}://{user}:***@{}", &url[..scheme_end], &url[at + 1..])
                }
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn passwords_in_urls_are_hidden() {
        assert_eq!(
            redact_url("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("sqlite://idem.db"), "sqlite://idem.db");
    }
}
