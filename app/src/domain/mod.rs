//! Pure types shared by the server and the browser: no I/O, no HTTP, no SQL.

mod names;
mod people;

pub use names::{NameError, Namespace, Username};
pub use people::{ApiKeyInfo, Permission, Role, RoleParseError, UserInfo};
