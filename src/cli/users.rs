//! `idem users …`: people, from the command line, with the same rules and audit events as
//! the REST API (actor `cli`).

use app::admin_actions::account_events;
use app::audit::actions;
use app::domain::{Role, Username};
use app::identity::{AccountChange, AccountChanged};
use clap::Subcommand;
use serde_json::json;

use super::{audit, identity, read_password};
use crate::config::DatabaseArgs;

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create a person; the password is read from the first line of stdin.
    Create {
        #[arg(long)]
        username: String,
        /// viewer, operator, approver or admin.
        #[arg(long)]
        role: String,
        /// Read the password from stdin (required: passwords never go on the command line).
        #[arg(long, required = true)]
        password_stdin: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// List people and their roles.
    List {
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Set a new password (from stdin) and end the person's sessions.
    SetPassword {
        #[arg(long)]
        username: String,
        #[arg(long, required = true)]
        password_stdin: bool,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Disable a person: their sessions end at once and they cannot sign in.
    Disable {
        #[arg(long)]
        username: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Enable a disabled person again.
    Enable {
        #[arg(long)]
        username: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Change a person's role.
    SetRole {
        #[arg(long)]
        username: String,
        /// viewer, operator, approver or admin.
        #[arg(long)]
        role: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Delete a person and end their sessions (the audit log keeps their name).
    Delete {
        #[arg(long)]
        username: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

pub async fn users(command: UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Create {
            username,
            role,
            database,
            ..
        } => {
            let username = Username::try_from(username)?;
            let role: Role = role.parse()?;
            let password = read_password()?;
            let (db, identity) = identity(&database).await?;
            let user = identity.create_user(username, role, &password).await?;
            let subject = format!("user:{}", user.username);
            let detail = json!({ "role": user.role });
            audit(&db, actions::USER_CREATED, subject, detail).await;
            db.close().await;
            println!("created {} ({})", user.username, user.role);
        }
        UsersCommand::List { database } => {
            let (db, identity) = identity(&database).await?;
            for user in identity.list_users().await? {
                println!("{:<32}  {}", user.username, user.role);
            }
            db.close().await;
        }
        UsersCommand::SetPassword {
            username, database, ..
        } => {
            let username = Username::try_from(username)?;
            let password = read_password()?;
            let (db, identity) = identity(&database).await?;
            identity.set_password(&username, &password).await?;
            let subject = format!("user:{username}");
            audit(&db, actions::PASSWORD_CHANGED, subject, json!({})).await;
            db.close().await;
            println!("password changed for {username}; their sessions have ended");
        }
        UsersCommand::Disable { username, database } => {
            let update = AccountChange::Update {
                disabled: Some(true),
                role: None,
            };
            change(&database, &username, update).await?;
            println!("disabled {username}; their sessions have ended");
        }
        UsersCommand::Enable { username, database } => {
            let update = AccountChange::Update {
                disabled: Some(false),
                role: None,
            };
            change(&database, &username, update).await?;
            println!("enabled {username}");
        }
        UsersCommand::SetRole {
            username,
            role,
            database,
        } => {
            let role: Role = role.parse()?;
            let update = AccountChange::Update {
                disabled: None,
                role: Some(role),
            };
            change(&database, &username, update).await?;
            println!("{username} is now {role}");
        }
        UsersCommand::Delete { username, database } => {
            change(&database, &username, AccountChange::Delete).await?;
            println!("deleted {username}; their sessions have ended");
        }
    }
    Ok(())
}

/// Applies an admin's change to the person named `username`, and audits it as `cli`.
async fn change(
    database: &DatabaseArgs,
    username: &str,
    change: AccountChange,
) -> anyhow::Result<()> {
    let username = Username::try_from(username)?;
    let (db, identity) = identity(database).await?;
    let outcome = match identity.user_by_username(&username).await? {
        Some(user) => identity.change_account(user.id, &change).await?,
        None => AccountChanged::NoSuchUser,
    };
    let result = match outcome {
        AccountChanged::Done { before, after } => {
            let subject = format!("user:{username}");
            if change == AccountChange::Delete {
                let detail = json!({ "role": before.role });
                audit(&db, actions::USER_DELETED, subject, detail).await;
            } else {
                for (action, detail) in account_events(&before, &after) {
                    audit(&db, action, subject.clone(), detail).await;
                }
            }
            Ok(())
        }
        AccountChanged::NoSuchUser => Err(anyhow::anyhow!("no user named {username}")),
        AccountChanged::LastAdmin => Err(anyhow::anyhow!(
            "{username} is the last enabled admin: make another admin first"
        )),
    };
    db.close().await;
    result
}
