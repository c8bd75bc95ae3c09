//! Pure types shared by the server and the browser: no I/O, no HTTP, no SQL.

mod canonical;
mod checked;
mod fingerprint;
mod key_choice;
mod keys;
mod names;
mod operation;
mod paths;
mod people;
mod redaction;
mod tool;
#[cfg(test)]
mod vectors;
pub mod whole_number;

pub use canonical::{canonical_json, check_depth, depth, TooDeep, MAX_DEPTH};
pub use fingerprint::{sha256_hex, Fingerprint, InvalidFingerprint};
pub use key_choice::{
    business_key_from_fields, derive_key, KeyChoice, KeyError, MAX_VERBATIM_RUN_ID_LEN,
};
pub use keys::{
    IdempotencyKey, InvalidIdempotencyKey, InvalidToolName, KeySource, KeySourceParseError,
    ToolName, MAX_KEY_LEN, MAX_TOOL_NAME_LEN,
};
pub use names::{NameError, Namespace, Username};
pub use operation::{
    transition, InvalidTransition, OperationStatus, Outcome, StatusParseError, Transition,
};
pub use paths::is_valid_path;
pub use people::{ApiKeyInfo, Permission, Role, RoleParseError, UserInfo};
pub use redaction::{is_card_number, redact, redact_answer, REDACTED};
pub use tool::{ApprovalPolicy, Effect, ExecutorConfig, Guarantee, ToolPolicy, ToolPolicyError};
