//! Who may do what: roles of people and the permissions they carry.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use uuid::Uuid;

use super::{Namespace, Username};

/// The role of a person. Agents have no role: they act through an API key of one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads everything.
    Viewer,
    /// Reads, reconciles and resolves operations.
    Operator,
    /// Reads, approves and rejects operations.
    Approver,
    /// Everything, including users, API keys and tools.
    Admin,
}

/// Something a person may be allowed to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// See operations, events, tools and metrics of every namespace.
    Read,
    /// Reconcile, resolve and expire operations.
    Operate,
    /// Approve or reject operations that wait for a person.
    Approve,
    /// Manage users, API keys and tools.
    Administer,
}

impl Role {
    /// Every role, weakest first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Operator, Role::Approver, Role::Admin];

    /// The role's name as it appears in the API and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Approver => "approver",
            Role::Admin => "admin",
        }
    }

    /// Whether this role carries the permission.
    pub fn can(self, permission: Permission) -> bool {
        matches!(
            (self, permission),
            (Role::Admin, _)
                | (_, Permission::Read)
                | (Role::Operator, Permission::Operate)
                | (Role::Approver, Permission::Approve)
        )
    }
}

/// A role name that is not one of `viewer`, `operator`, `approver`, `admin`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("role must be one of viewer, operator, approver, admin")]
pub struct RoleParseError;

impl FromStr for Role {
    type Err = RoleParseError;
    fn from_str(value: &str) -> Result<Self, RoleParseError> {
        Role::ALL
            .into_iter()
            .find(|role| role.as_str() == value)
            .ok_or(RoleParseError)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A person as others may see them (never the password hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct UserInfo {
    pub id: Uuid,
    pub username: Username,
    pub role: Role,
    pub created_at: DateTime<Utc>,
    /// A disabled person cannot sign in and has no sessions; an admin can enable them again.
    #[serde(default)]
    pub disabled: bool,
    /// Until they choose a new password, the person may only do that (the first admin,
    /// whose password was generated).
    #[serde(default)]
    pub must_change_password: bool,
}

/// An API key as it is listed: never the secret, only the prefix that identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ApiKeyInfo {
    pub id: Uuid,
    pub namespace: Namespace,
    pub name: String,
    /// The first characters of the key, enough to recognise it (`idem_AbC1…`).
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_by_role() {
        use Permission::*;
        let table = [
            (Role::Viewer, [true, false, false, false]),
            (Role::Operator, [true, true, false, false]),
            (Role::Approver, [true, false, true, false]),
            (Role::Admin, [true, true, true, true]),
        ];
        for (role, expected) in table {
            let actual = [Read, Operate, Approve, Administer].map(|p| role.can(p));
            assert_eq!(actual, expected, "{role}");
        }
    }

    #[test]
    fn roles_parse_from_their_names_only() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        assert_eq!("root".parse::<Role>(), Err(RoleParseError));
        assert_eq!("Admin".parse::<Role>(), Err(RoleParseError));
    }
}
