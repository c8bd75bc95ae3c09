//! What admins do: register tools, create people, create and revoke API keys. Each is
//! checked, done through the ledger or the identity service, and recorded in the audit of
//! people. The REST handlers and the UI's server functions both come through here, so the two
//! doors leave the same trail.

use serde_json::json;
use uuid::Uuid;

use crate::audit::{actions, person_actor, AuditLog, PersonAction};
use crate::domain::{ApiKeyInfo, Namespace, Role, ToolPolicy, UserInfo, Username};
use crate::identity::{AccountChange, AccountChanged, ApiKeySecret, Identity, IdentityError};
use crate::ledger::{Ledger, LedgerError, RegisteredTool};
use crate::people_actions::Acting;

/// Why an admin's action was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// `invalid_namespace`.
    #[error("{0}")]
    InvalidNamespace(String),
    /// `invalid_username`.
    #[error("{0}")]
    InvalidUsername(String),
    /// `invalid_role`.
    #[error("{0}")]
    InvalidRole(String),
    /// There is no API key with that id.
    #[error("no such API key")]
    NoSuchKey,
    /// There is no person with that id.
    #[error("no such user")]
    NoSuchUser,
    /// `last_admin`: the change would leave no enabled admin.
    #[error("this is the last enabled admin: make another admin first")]
    LastAdmin,
    /// `invalid_request`: a change that changes nothing.
    #[error("say what to change: disabled, role or both")]
    NothingToChange,
    /// The identity service refused or failed (weak password, username taken, …).
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The ledger refused or failed (invalid tool name or policy, …).
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// An API key just created: its listing and the only copy of the key itself.
pub struct CreatedKey {
    pub info: ApiKeyInfo,
    pub secret: ApiKeySecret,
}

/// Admins' actions. Cheap to clone.
#[derive(Clone)]
pub struct AdminActions {
    ledger: Ledger,
    identity: Identity,
    audit: AuditLog,
}

impl AdminActions {
    pub fn new(ledger: Ledger, identity: Identity, audit: AuditLog) -> Self {
        Self {
            ledger,
            identity,
            audit,
        }
    }

    /// Registers a tool or replaces its policy.
    #[tracing::instrument(skip_all, fields(actor = %by.person.username, tool = ?name))]
    pub async fn register_tool(
        &self,
        by: &Acting,
        name: &str,
        policy: ToolPolicy,
    ) -> Result<RegisteredTool, AdminError> {
        let tool = self.ledger.put_tool(name, policy).await?;
        let detail = json!({ "policy": tool.policy });
        self.record(
            by,
            actions::TOOL_REGISTERED,
            format!("tool:{}", tool.name),
            detail,
        )
        .await;
        Ok(tool)
    }

    /// Creates an API key of a namespace; the secret in the answer is the only copy.
    #[tracing::instrument(skip_all, fields(actor = %by.person.username))]
    pub async fn create_api_key(
        &self,
        by: &Acting,
        namespace: String,
        name: Option<String>,
    ) -> Result<CreatedKey, AdminError> {
        let namespace = Namespace::try_from(namespace)
            .map_err(|e| AdminError::InvalidNamespace(e.to_string()))?;
        let (info, secret) = self.identity.create_api_key(namespace, name).await?;
        let detail = json!({ "namespace": info.namespace, "name": info.name });
        self.record(
            by,
            actions::API_KEY_CREATED,
            format!("api_key:{}", info.id),
            detail,
        )
        .await;
        Ok(CreatedKey { info, secret })
    }

    /// Revokes an API key: it stops working at once.
    #[tracing::instrument(skip_all, fields(actor = %by.person.username, key_id = %id))]
    pub async fn revoke_api_key(&self, by: &Acting, id: Uuid) -> Result<(), AdminError> {
        if !self.identity.revoke_api_key(id).await? {
            return Err(AdminError::NoSuchKey);
        }
        self.record(
            by,
            actions::API_KEY_REVOKED,
            format!("api_key:{id}"),
            json!({}),
        )
        .await;
        Ok(())
    }

    /// Creates a person with a role and a password.
    #[tracing::instrument(skip_all, fields(actor = %by.person.username))]
    pub async fn create_user(
        &self,
        by: &Acting,
        username: String,
        role: &str,
        password: &str,
    ) -> Result<UserInfo, AdminError> {
        let username =
            Username::try_from(username).map_err(|e| AdminError::InvalidUsername(e.to_string()))?;
        let role = role
            .parse::<Role>()
            .map_err(|e| AdminError::InvalidRole(e.to_string()))?;
        let user = self.identity.create_user(username, role, password).await?;
        let detail = json!({ "role": user.role });
        self.record(
            by,
            actions::USER_CREATED,
            format!("user:{}", user.username),
            detail,
        )
        .await;
        Ok(user)
    }

    /// Disables or enables a person, or changes their role. Disabling ends their sessions.
    #[tracing::instrument(skip_all, fields(actor = %by.person.username, user_id = %id))]
    pub async fn update_user(
        &self,
        by: &Acting,
        id: Uuid,
        disabled: Option<bool>,
        role: Option<&str>,
    ) -> Result<UserInfo, AdminError> {
        let role = role
            .map(str::parse::<Role>)
            .transpose()
            .map_err(|e| AdminError::InvalidRole(e.to_string()))?;
        if disabled.is_none() && role.is_none() {
            return Err(AdminError::NothingToChange);
        }
        let change = AccountChange::Update { disabled, role };
        let (before, after) = self.change(id, &change).await?;
        for (action, detail) in account_events(&before, &after) {
            self.record(by, action, format!("user:{}", after.username), detail)
                .await;
        }
        Ok(after)
    }

    /// Deletes a person and ends their sessions; the audit keeps their name.
    #[tracing::instrument(skip_all, fields(actor = %by.person.username, user_id = %id))]
    pub async fn delete_user(&self, by: &Acting, id: Uuid) -> Result<(), AdminError> {
        let (gone, _) = self.change(id, &AccountChange::Delete).await?;
        let detail = json!({ "role": gone.role });
        self.record(
            by,
            actions::USER_DELETED,
            format!("user:{}", gone.username),
            detail,
        )
        .await;
        Ok(())
    }

    /// Applies the change; the person as they were before it and as they are after.
    async fn change(
        &self,
        id: Uuid,
        change: &AccountChange,
    ) -> Result<(UserInfo, UserInfo), AdminError> {
        match self.identity.change_account(id, change).await? {
            AccountChanged::Done { before, after } => Ok((before, after)),
            AccountChanged::NoSuchUser => Err(AdminError::NoSuchUser),
            AccountChanged::LastAdmin => Err(AdminError::LastAdmin),
        }
    }

    async fn record(
        &self,
        by: &Acting,
        action: &'static str,
        subject: String,
        detail: serde_json::Value,
    ) {
        self.audit
            .record(PersonAction {
                actor: person_actor(&by.person.username),
                address: by.address,
                action,
                subject,
                detail,
            })
            .await;
    }
}

/// The audit events of a change to a person: one per thing that changed.
pub fn account_events(
    before: &UserInfo,
    after: &UserInfo,
) -> Vec<(&'static str, serde_json::Value)> {
    let mut events = Vec::new();
    if before.role != after.role {
        let detail = json!({ "from": before.role, "to": after.role });
        events.push((actions::USER_ROLE_CHANGED, detail));
    }
    match (before.disabled, after.disabled) {
        (false, true) => events.push((actions::USER_DISABLED, json!({}))),
        (true, false) => events.push((actions::USER_ENABLED, json!({}))),
        _ => {}
    }
    events
}
