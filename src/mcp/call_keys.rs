//! Which idempotency key a `tools/call` claims, from the request's `_meta`.
//!
//! A harness that knows its run puts `idem/run_id` and `idem/step` (or an explicit business
//! key, `idem/key`) in `_meta`. Without them the proxy's MCP session is the run and every call
//! is step 0, so the server derives the key from the session, the tool and the canonical
//! arguments: two identical calls in one session are then one action.

use rmcp::model::JsonObject;
use serde_json::Value;

use super::ledger_client::Claim;

/// `_meta` entry of the run the call belongs to.
pub const META_RUN_ID: &str = "idem/run_id";
/// `_meta` entry of the call's step within its run.
pub const META_STEP: &str = "idem/step";
/// `_meta` entry of an explicit idempotency key.
pub const META_KEY: &str = "idem/key";

/// The claim for a call of `tool` with `args`, keyed by `meta` or else by the session.
pub fn claim_for(tool: &str, args: Value, meta: &[&JsonObject], session_run: &str) -> Claim {
    let find = |name: &str| meta.iter().find_map(|m| m.get(name));
    let run_id = find(META_RUN_ID)
        .and_then(Value::as_str)
        .unwrap_or(session_run)
        .to_owned();
    let step = find(META_STEP).and_then(step_number).unwrap_or(0);
    let key = find(META_KEY).and_then(Value::as_str).map(str::to_owned);
    Claim {
        tool: tool.to_owned(),
        args,
        key,
        run_id,
        step,
    }
}

/// A step as a number or a string of digits (harnesses differ).
fn step_number(value: &Value) -> Option<u64> {
    value
        .as_u64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> JsonObject {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn meta_keys_win_over_the_session() {
        let meta = object(json!({ "idem/run_id": "run-7", "idem/step": "3", "idem/key": "k-1" }));
        let claim = claim_for("refund", json!({}), &[&meta], "session-1");
        assert_eq!((claim.run_id.as_str(), claim.step), ("run-7", 3));
        assert_eq!(claim.key.as_deref(), Some("k-1"));
    }

    #[test]
    fn without_meta_the_session_is_the_run_and_the_step_is_zero() {
        let claim = claim_for("refund", json!({ "a": 1 }), &[], "session-1");
        assert_eq!(
            (claim.run_id.as_str(), claim.step, claim.key),
            ("session-1", 0, None)
        );
    }
}
