//! People's accounts: admins disable, enable, re-role and delete them; each person changes
//! their own password.

use chrono::Utc;
use uuid::Uuid;

use super::{Identity, IdentityError};
use crate::domain::{UserInfo, Username};
use crate::identity::{AccountChange, AccountChanged, SecretHash};

impl Identity {
    /// The person with this username, if any.
    pub async fn user_by_username(
        &self,
        username: &Username,
    ) -> Result<Option<UserInfo>, IdentityError> {
        let stored = self.store.user_by_username(username).await?;
        Ok(stored.map(|user| user.info))
    }

    /// Applies an admin's change to a person (see [`AccountChange`]); disabling or deleting
    /// ends their sessions at once, and the last enabled admin is never taken away.
    #[tracing::instrument(skip_all, fields(user_id = %id))]
    pub async fn change_account(
        &self,
        id: Uuid,
        change: &AccountChange,
    ) -> Result<AccountChanged, IdentityError> {
        Ok(self.store.change_account(id, change, Utc::now()).await?)
    }

    /// Changes the signed-in person's own password, given their current one, and ends
    /// their other sessions; the session of `session_token` stays. Clears the obligation to
    /// change a generated password.
    #[tracing::instrument(skip_all, fields(username = %person.username))]
    pub async fn change_own_password(
        &self,
        person: &UserInfo,
        session_token: &str,
        current: &str,
        new: &str,
    ) -> Result<(), IdentityError> {
        self.check_password(new)?;
        let stored = self.store.user_by_username(&person.username).await?;
        let hash = stored.map(|user| user.password_hash);
        if !self.hasher.verify(current.to_owned(), hash).await? {
            return Err(IdentityError::WrongCurrentPassword);
        }
        let hash = self.hasher.hash(new.to_owned()).await;
        let keep = SecretHash::of(session_token);
        Ok(self.store.set_own_password(person.id, hash, &keep).await?)
    }
}
