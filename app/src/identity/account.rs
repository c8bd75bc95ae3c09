//! What admins change about a person's account, and the one rule that guards it: the last
//! enabled admin stays, so nobody can lock every admin out.

use crate::domain::{Role, UserInfo};

/// An admin's change to a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountChange {
    /// Disable or enable the person, change their role, or both.
    Update {
        disabled: Option<bool>,
        role: Option<Role>,
    },
    /// Delete the person (the audit keeps their name).
    Delete,
}

/// What came of an [`AccountChange`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountChanged {
    /// Done: the person as they were and as they are now (the same, for a deletion).
    Done { before: UserInfo, after: UserInfo },
    /// No person has that id.
    NoSuchUser,
    /// Refused: it would leave no enabled admin.
    LastAdmin,
}

impl AccountChange {
    /// Whether the change takes an enabled admin away (disables, demotes or deletes one):
    /// such a change is refused when that admin is the last.
    pub fn removes_an_admin(&self, user: &UserInfo) -> bool {
        let enabled_admin = |role: Role, disabled: bool| role == Role::Admin && !disabled;
        if !enabled_admin(user.role, user.disabled) {
            return false;
        }
        match self {
            AccountChange::Delete => true,
            AccountChange::Update { disabled, role } => {
                !enabled_admin(role.unwrap_or(user.role), disabled.unwrap_or(user.disabled))
            }
        }
    }

    /// Whether the change ends the person's sessions (disabling and deleting do).
    pub fn ends_sessions(&self) -> bool {
        matches!(
            self,
            AccountChange::Delete
                | AccountChange::Update {
                    disabled: Some(true),
                    ..
                }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Username;
    use chrono::Utc;

    fn person(role: Role, disabled: bool) -> UserInfo {
        UserInfo {
            id: uuid::Uuid::nil(),
            username: Username::try_from("ada").unwrap(),
            role,
            created_at: Utc::now(),
            disabled,
            must_change_password: false,
        }
    }

    #[test]
    fn only_changes_that_take_an_enabled_admin_away_remove_an_admin() {
        let update = |disabled, role| AccountChange::Update { disabled, role };
        // (person's role, disabled?, change, removes an admin?)
        let cases = [
            (Role::Admin, false, AccountChange::Delete, true),
            (Role::Admin, false, update(Some(true), None), true),
            (Role::Admin, false, update(None, Some(Role::Viewer)), true),
            (Role::Admin, false, update(None, Some(Role::Admin)), false),
            (Role::Admin, false, update(Some(false), None), false),
            (Role::Admin, true, AccountChange::Delete, false),
            (
                Role::Admin,
                true,
                update(Some(false), Some(Role::Viewer)),
                false,
            ),
            (Role::Viewer, false, AccountChange::Delete, false),
            (
                Role::Viewer,
                false,
                update(Some(true), Some(Role::Admin)),
                false,
            ),
        ];
        for (role, disabled, change, removes) in cases {
            assert_eq!(
                change.removes_an_admin(&person(role, disabled)),
                removes,
                "{role} disabled={disabled} {change:?}"
            );
        }
    }
}
