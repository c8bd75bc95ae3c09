//! People and agents: who they are, how they prove it, and what they may do.
//!
//! The rules here know nothing of SQL; the one HTTP detail, the cookie format, sits in
//! `cookie` so that the REST routes and the UI agree on it. The server crate implements
//! [`IdentityStore`] for each database and turns [`IdentityError`] into responses.

mod account;
mod cookie;
mod password;
mod secret;
mod service;
mod store;
mod throttle;

pub use account::{AccountChange, AccountChanged};
pub use cookie::{SessionCookie, SESSION_COOKIE};
pub use password::PasswordHasher;
pub use secret::{random_token, ApiKeySecret, SecretHash, SessionToken};
pub use service::{Agent, Identity, IdentityError, IdentityPolicy, MIN_PASSWORD_LENGTH};
pub use store::{IdentityStore, NewApiKey, NewSession, NewUser, StoredSession, StoredUser};
pub use throttle::LoginThrottle;
