//! From what an agent sent to a claim the rules can decide: the tool's name, the arguments'
//! shape and depth, the key, the fingerprint and the redacted arguments. Pure, so that it can
//! be fuzzed (`tests/fuzz`) and tested without a database.

use super::error::LedgerError;
use super::model::ClaimRequest;
use super::sent_claim::SentClaim;
use crate::domain::{self, Fingerprint, KeyChoice, Namespace, ToolName, ToolPolicy};

/// The checks that need no tool policy: the tool's name, and `args` being an object nested at
/// most [`domain::MAX_DEPTH`] deep. Returns the tool, whose policy the caller then looks up.
pub fn check_request(request: &SentClaim) -> Result<ToolName, LedgerError> {
    let tool = ToolName::try_from(request.tool.as_str())
        .map_err(|e| LedgerError::invalid(e.code(), e.to_string()))?;
    if !request.args.is_object() {
        return Err(LedgerError::invalid(
            "invalid_args",
            "args must be a JSON object",
        ));
    }
    domain::check_depth(&request.args, domain::MAX_DEPTH)
        .map_err(|e| LedgerError::invalid("json_too_deep", e.to_string()))?;
    Ok(tool)
}

/// Chooses the key, computes the fingerprint (from the arguments as sent) and redacts the
/// arguments, under the tool's policy. Expects a request that passed [`check_request`].
pub fn prepare_claim(
    namespace: &Namespace,
    tool: ToolName,
    request: SentClaim,
    policy: ToolPolicy,
) -> Result<ClaimRequest, LedgerError> {
    let choice = KeyChoice {
        header: request.header_key.as_deref(),
        key: request.body_key.as_deref(),
        business_key: request.business_key.as_deref(),
        run_id: request.run_id.as_deref(),
        step: request.step,
    };
    let (key, key_source) = choice
        .resolve(&tool, &request.args, &policy)
        .map_err(|e| LedgerError::invalid(e.code(), e.to_string()))?;
    let fingerprint = Fingerprint::compute(&tool, &request.args, &policy.ignore_fields);
    let args = domain::redact(&request.args, &policy.redact_fields);
    Ok(ClaimRequest {
        namespace: namespace.clone(),
        key,
        key_source,
        tool,
        policy,
        fingerprint,
        args,
        run_id: request.run_id,
        step: request.step,
        runner: request.runner,
    })
}
