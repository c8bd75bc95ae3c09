//! The tool results the proxy gives the model when it did not (or not just now) call the
//! tool: a replay, a wait for approval, a rejection, a call still running, an unknown outcome.
//! They are tool results, not protocol errors, so the model reads them.

use rmcp::model::{CallToolResult, ContentBlock as Content};
use serde_json::Value;

/// A stored outcome given back, with idem's note first so the model knows it happened once.
pub fn replay(operation: &Value, note: &str) -> CallToolResult {
    if operation["status"] == "rejected" {
        return rejected(operation, note);
    }
    let mut result = stored_result(operation);
    result.content.insert(0, Content::text(note.to_owned()));
    result
}

/// The `CallToolResult` stored with the operation, or one made of what a person recorded.
fn stored_result(operation: &Value) -> CallToolResult {
    let failed = operation["status"] == "failed";
    if let Ok(result) = serde_json::from_value::<CallToolResult>(operation["result"].clone()) {
        if !result.content.is_empty() || result.structured_content.is_some() {
            return result;
        }
    }
    let what = if failed {
        &operation["error"]
    } else {
        &operation["result"]
    };
    let content = vec![Content::text(what.to_string())];
    if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// A person said no: who, and why.
fn rejected(operation: &Value, note: &str) -> CallToolResult {
    let approval = &operation["approval"];
    let who = approval["decided_by"].as_str().unwrap_or("an approver");
    let reason = approval["reason"].as_str().unwrap_or("no reason given");
    CallToolResult::error(vec![Content::text(format!(
        "Not done: {who} rejected this call in idem. Reason: {reason}. Do not retry it. ({note})"
    ))])
}

/// The tool needs a person's approval first.
pub fn awaiting_approval(operation: &Value) -> CallToolResult {
    let id = operation["id"].as_str().unwrap_or_default();
    CallToolResult::error(vec![Content::text(format!(
        "Nothing was done yet: this call needs a person's approval in idem (operation {id}). \
         Once it is approved, calling the tool again with the same arguments runs it, once."
    ))])
}

/// Another call with the same key holds the lease.
pub fn still_running() -> CallToolResult {
    CallToolResult::error(vec![Content::text(
        "The same call is still running (started earlier); no second action was taken. \
         Call again later with the same arguments to get its outcome.",
    )])
}

/// Nobody knows whether the tool acted.
pub fn outcome_unknown(why: &str) -> CallToolResult {
    CallToolResult::error(vec![Content::text(format!(
        "The outcome of this call is unknown ({why}): it may or may not have taken effect. \
         Do not retry it; idem's reconciliation or an operator settles it."
    ))])
}

/// The same key was used with other arguments.
pub fn key_reused(message: &str) -> CallToolResult {
    CallToolResult::error(vec![Content::text(format!(
        "Not done: this idempotency key was already used with other arguments ({message})."
    ))])
}

/// idem refused the claim or could not be reached: the tool was not called.
pub fn not_done(why: &str) -> CallToolResult {
    CallToolResult::error(vec![Content::text(format!(
        "Not done: idem did not let this call through ({why}); the tool was not called."
    ))])
}
