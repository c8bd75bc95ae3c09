//! `idem keys …`: the API keys agents use, from the command line (audited as actor `cli`).

use anyhow::bail;
use app::audit::actions;
use app::domain::Namespace;
use clap::Subcommand;
use serde_json::json;
use uuid::Uuid;

use super::{audit, identity};
use crate::config::DatabaseArgs;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key for a namespace and print it, alone, on stdout (it is shown only once).
    Create {
        #[arg(long)]
        namespace: String,
        /// A label to recognise the key by.
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List keys (never the secrets).
    List {
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Revoke a key by its id.
    Revoke {
        id: Uuid,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

pub(super) async fn keys(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create {
            namespace,
            name,
            database,
        } => {
            let namespace = Namespace::try_from(namespace)?;
            let (db, identity) = identity(&database).await?;
            let (info, secret) = identity.create_api_key(namespace, name).await?;
            let detail = json!({ "namespace": info.namespace, "name": info.name });
            audit(
                &db,
                actions::API_KEY_CREATED,
                format!("api_key:{}", info.id),
                detail,
            )
            .await;
            println!("{}", secret.expose());
            db.close().await;
        }
        KeysCommand::List { database } => {
            let (db, identity) = identity(&database).await?;
            println!(
                "{:<36}  {:<20}  {:<20}  {:<11}  {:<20}  status",
                "id", "namespace", "name", "prefix", "last used"
            );
            for key in identity.list_api_keys().await? {
                let last_used = key.last_used_at.map_or("never".to_owned(), |t| {
                    t.format("%Y-%m-%d %H:%M:%S").to_string()
                });
                let status = if key.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                println!(
                    "{:<36}  {:<20}  {:<20}  {:<11}  {:<20}  {status}",
                    key.id, key.namespace, key.name, key.prefix, last_used
                );
            }
            db.close().await;
        }
        KeysCommand::Revoke { id, database } => {
            let (db, identity) = identity(&database).await?;
            let exists = identity.revoke_api_key(id).await?;
            if exists {
                audit(
                    &db,
                    actions::API_KEY_REVOKED,
                    format!("api_key:{id}"),
                    json!({}),
                )
                .await;
            }
            db.close().await;
            if !exists {
                bail!("no API key with id {id}");
            }
            println!("revoked {id}");
        }
    }
    Ok(())
}
