//! The demo's people and its agent's API key, made through the identity service with the same
//! audit entries as the `users` and `keys` commands.

use app::audit::{actions, AuditLog};

use super::record;
use app::domain::{Namespace, Role, Username};
use app::identity::{random_token, Identity, IdentityError};
use serde_json::json;

/// The demo's people, one per role; each gets a fresh password at every start.
pub const PEOPLE: [(&str, Role); 4] = [
    ("demo-admin", Role::Admin),
    ("demo-approver", Role::Approver),
    ("demo-operator", Role::Operator),
    ("demo-viewer", Role::Viewer),
];

/// The namespace the demo agent works in.
pub const NAMESPACE: &str = "demo";

/// The name of the demo agent's key, by which the keys of earlier starts are found.
const KEY_NAME: &str = "demo agent";

/// A person the demo made ready, with the password to show.
pub struct DemoPerson {
    pub username: &'static str,
    pub password: String,
}

/// Creates each demo person, or gives an existing one a new password (ending their
/// sessions): every start prints passwords that work.
pub async fn ensure_people(
    identity: &Identity,
    audit: &AuditLog,
) -> Result<Vec<DemoPerson>, IdentityError> {
    let mut people = Vec::with_capacity(PEOPLE.len());
    for (name, role) in PEOPLE {
        let username = Username::try_from(name).expect("demo usernames are valid");
        let password: String = random_token().chars().take(24).collect();
        let subject = format!("user:{username}");
        match identity
            .create_user(username.clone(), role, &password)
            .await
        {
            Ok(_) => {
                let detail = json!({ "role": role, "demo": true });
                record(audit, actions::USER_CREATED, subject, detail).await;
            }
            Err(IdentityError::UsernameTaken(_)) => {
                identity.set_password(&username, &password).await?;
                let detail = json!({ "demo": true });
                record(audit, actions::PASSWORD_CHANGED, subject, detail).await;
            }
            Err(other) => return Err(other),
        }
        people.push(DemoPerson {
            username: name,
            password,
        });
    }
    Ok(people)
}

/// A new API key of the demo namespace; the keys earlier starts made are revoked, so they
/// do not pile up.
pub async fn fresh_agent_key(
    identity: &Identity,
    audit: &AuditLog,
) -> Result<String, IdentityError> {
    let namespace = Namespace::try_from(NAMESPACE).expect("the demo namespace is valid");
    for old in identity.list_api_keys().await? {
        let earlier_demo_key =
            old.namespace == namespace && old.name == KEY_NAME && old.revoked_at.is_none();
        if earlier_demo_key && identity.revoke_api_key(old.id).await? {
            let subject = format!("api_key:{}", old.id);
            record(audit, actions::API_KEY_REVOKED, subject, json!({})).await;
        }
    }
    let (info, secret) = identity
        .create_api_key(namespace, Some(KEY_NAME.into()))
        .await?;
    let detail = json!({ "namespace": info.namespace, "name": info.name });
    let subject = format!("api_key:{}", info.id);
    record(audit, actions::API_KEY_CREATED, subject, detail).await;
    Ok(secret.expose().to_owned())
}
