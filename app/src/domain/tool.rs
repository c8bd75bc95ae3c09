//! How the ledger treats a tool: what its calls do to the world, who must approve them, how
//! their arguments are identified, and which promise idem can keep for them.

use serde::{Deserialize, Serialize};

use super::paths::is_valid_path;

/// What calling a tool does to the world, which decides what a repeat may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Changes nothing; repeating it is harmless.
    ReadOnly,
    /// Changes something, but doing it twice is the same as once.
    IdempotentWrite,
    /// Doing it twice does it twice (a refund, an email).
    #[default]
    NonIdempotentWrite,
    /// Cannot be undone; a person approves every call.
    Irreversible,
}

impl Effect {
    /// The effect's name as it appears in the API and the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::IdempotentWrite => "idempotent_write",
            Self::NonIdempotentWrite => "non_idempotent_write",
            Self::Irreversible => "irreversible",
        }
    }

    /// Whether a claim may take over an operation whose lease ran out, instead of the operation
    /// becoming `unknown`: only when running the call again is harmless.
    pub fn allows_lease_takeover(self) -> bool {
        matches!(self, Self::ReadOnly | Self::IdempotentWrite)
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether calls wait for a person.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Only irreversible tools wait for approval.
    #[default]
    Auto,
    /// Every new operation waits for approval.
    Always,
}

/// The promise idem can keep for a tool (the `guarantee` of a tool in the API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Guarantee {
    /// Read-only: any number of calls is fine.
    Repeatable,
    /// Retries are safe: the tool is idempotent, or its provider dedupes by key.
    ExactlyOnce,
    /// After an ambiguous outcome idem never re-sends; the operation waits as `unknown` for
    /// reconciliation or a person.
    AtMostOnce,
    /// At most once, and only after a person approved it.
    AtMostOnceApproved,
}

/// Where the ledger itself calls the tool (`POST /v1/tools/{name}/invoke`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ExecutorConfig {
    /// The tool's endpoint; it receives the key as `Idempotency-Key`.
    pub url: String,
    /// Answers `GET reconcile_url?key=<key>` with whether the provider saw that key.
    #[serde(default)]
    pub reconcile_url: Option<String>,
    /// How long to wait for the tool before the outcome is `unknown`.
    #[serde(
        default = "default_timeout_ms",
        deserialize_with = "super::whole_number::u32_whole"
    )]
    pub timeout_ms: u32,
    /// The provider honours `Idempotency-Key`, so re-sending a key is safe.
    #[serde(default)]
    pub provider_dedupes: bool,
}

impl ExecutorConfig {
    /// The executor as shown to anyone but an admin: each URL cut to its origin
    /// (`scheme://host:port`), since a path, a query or user info may carry credentials.
    /// Enough to tell that an executor is configured and where it runs.
    pub fn without_credentials(&self) -> Self {
        Self {
            url: origin_of(&self.url),
            reconcile_url: self.reconcile_url.as_deref().map(origin_of),
            ..self.clone()
        }
    }
}

/// `scheme://host[:port]` of a URL, without user info, path, query or fragment; a text with
/// no scheme is shown as nothing but its host part.
pub fn origin_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if scheme.is_empty() {
        host.to_owned()
    } else {
        format!("{scheme}://{host}")
    }
}

fn default_timeout_ms() -> u32 {
    5_000
}

fn default_ttl_seconds() -> u32 {
    86_400
}

fn default_lease_seconds() -> u32 {
    30
}

fn default_approval_ttl_seconds() -> u32 {
    86_400
}

/// A tool's registration. Every field has the default that an unregistered tool gets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ToolPolicy {
    /// What a call does to the world.
    #[serde(default)]
    pub effect: Effect,
    /// Whether calls wait for a person.
    #[serde(default)]
    pub approval: ApprovalPolicy,
    /// How long a key lives once its operation has settled.
    #[serde(
        default = "default_ttl_seconds",
        deserialize_with = "super::whole_number::u32_whole"
    )]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 4_294_967_295_u64))]
    pub ttl_seconds: u32,
    /// How long a claim holds the operation before it is taken over or becomes `unknown`.
    #[serde(
        default = "default_lease_seconds",
        deserialize_with = "super::whole_number::u32_whole"
    )]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 3600))]
    pub lease_seconds: u32,
    /// How long a request for approval stays open; after it, the operation is `rejected`
    /// with the reason "approval expired".
    #[serde(
        default = "default_approval_ttl_seconds",
        deserialize_with = "super::whole_number::u32_whole"
    )]
    #[cfg_attr(feature = "ssr", schema(minimum = 1, maximum = 4_294_967_295_u64))]
    pub approval_ttl_seconds: u32,
    /// Dotted paths of the arguments that identify the intent: key = tool + these args.
    #[serde(default)]
    pub key_fields: Vec<String>,
    /// Dotted paths left out of the fingerprint.
    #[serde(default)]
    pub ignore_fields: Vec<String>,
    /// Dotted paths stored and shown as `"[redacted]"`, besides the ones redacted always.
    #[serde(default)]
    pub redact_fields: Vec<String>,
    /// Where the ledger calls the tool itself, if it does.
    #[serde(default)]
    pub executor: Option<ExecutorConfig>,
}

impl Default for ToolPolicy {
    fn default() -> Self {
        Self::default_for_unregistered()
    }
}

/// Why a tool registration was refused; the message is written for the admin who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolPolicyError {
    /// `ttl_seconds` is 0.
    #[error("ttl_seconds must be at least 1")]
    Ttl,
    /// `lease_seconds` is outside 1..=3600.
    #[error("lease_seconds must be 1 to 3600")]
    Lease,
    /// `approval_ttl_seconds` is 0.
    #[error("approval_ttl_seconds must be at least 1")]
    ApprovalTtl,
    /// `executor.timeout_ms` is outside 1..=300000.
    #[error("executor.timeout_ms must be 1 to 300000")]
    Timeout,
    /// A field path is empty or has an empty part.
    #[error("{list} has {path:?}, which is not a dotted path like \"card.number\"")]
    FieldPath {
        /// `key_fields`, `ignore_fields` or `redact_fields`.
        list: &'static str,
        /// The refused path.
        path: String,
    },
    /// A URL that is not http or https.
    #[error("{field} must start with http:// or https://")]
    Url {
        /// `executor.url` or `executor.reconcile_url`.
        field: &'static str,
    },
}

impl ToolPolicyError {
    /// The API's error code.
    pub fn code(&self) -> &'static str {
        "invalid_tool_policy"
    }
}

impl ToolPolicy {
    /// The policy as shown to anyone but an admin: its executor's URLs cut to their origin.
    pub fn without_credentials(&self) -> Self {
        Self {
            executor: self
                .executor
                .as_ref()
                .map(ExecutorConfig::without_credentials),
            ..self.clone()
        }
    }

    /// How the ledger treats a tool that was never registered.
    pub fn default_for_unregistered() -> Self {
        Self {
            effect: Effect::NonIdempotentWrite,
            approval: ApprovalPolicy::Auto,
            ttl_seconds: default_ttl_seconds(),
            lease_seconds: default_lease_seconds(),
            approval_ttl_seconds: default_approval_ttl_seconds(),
            key_fields: Vec::new(),
            ignore_fields: Vec::new(),
            redact_fields: Vec::new(),
            executor: None,
        }
    }

    /// Whether a new operation waits for a person: irreversible tools, and `approval: always`.
    pub fn needs_approval(&self) -> bool {
        self.effect == Effect::Irreversible || self.approval == ApprovalPolicy::Always
    }

    /// Whether a claim may take over an operation whose lease ran out (see
    /// [`Effect::allows_lease_takeover`]).
    pub fn lease_takeover_allowed(&self) -> bool {
        self.effect.allows_lease_takeover()
    }

    /// The promise idem can keep for this tool.
    pub fn guarantee(&self) -> Guarantee {
        let provider_dedupes = self.executor.as_ref().is_some_and(|e| e.provider_dedupes);
        match self.effect {
            Effect::ReadOnly => Guarantee::Repeatable,
            Effect::IdempotentWrite => Guarantee::ExactlyOnce,
            Effect::NonIdempotentWrite if provider_dedupes => Guarantee::ExactlyOnce,
            Effect::NonIdempotentWrite => Guarantee::AtMostOnce,
            Effect::Irreversible => Guarantee::AtMostOnceApproved,
        }
    }

    /// Refuses a registration the ledger could not honour.
    pub fn validate(&self) -> Result<(), ToolPolicyError> {
        if self.ttl_seconds < 1 {
            return Err(ToolPolicyError::Ttl);
        }
        if !(1..=3600).contains(&self.lease_seconds) {
            return Err(ToolPolicyError::Lease);
        }
        if self.approval_ttl_seconds < 1 {
            return Err(ToolPolicyError::ApprovalTtl);
        }
        let lists = [
            ("key_fields", &self.key_fields),
            ("ignore_fields", &self.ignore_fields),
            ("redact_fields", &self.redact_fields),
        ];
        for (list, paths) in lists {
            if let Some(path) = paths.iter().find(|path| !is_valid_path(path)) {
                let path = path.clone();
                return Err(ToolPolicyError::FieldPath { list, path });
            }
        }
        if let Some(executor) = &self.executor {
            if !(1..=300_000).contains(&executor.timeout_ms) {
                return Err(ToolPolicyError::Timeout);
            }
            let urls = [
                ("executor.url", Some(&executor.url)),
                ("executor.reconcile_url", executor.reconcile_url.as_ref()),
            ];
            for (field, url) in urls {
                if url.is_some_and(|url| !is_http_url(url)) {
                    return Err(ToolPolicyError::Url { field });
                }
            }
        }
        Ok(())
    }
}

/// `http://` or `https://` followed by at least a host; the scheme is case-insensitive.
fn is_http_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["http://", "https://"].iter().any(|scheme| {
        lower
            .strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty())
    })
}

#[cfg(test)]
mod tests;
