//! What the rules' tests claim with.

use serde_json::json;
use uuid::Uuid;

use super::{ClaimRequest, Fresh, Runner};
use crate::domain::{Fingerprint, IdempotencyKey, KeySource, Namespace, ToolName, ToolPolicy};

/// A refund of order 1 by an agent of `billing`, under the key `k`, at step 4; the tool is
/// unregistered (the default policy).
pub(crate) fn refund_request() -> ClaimRequest {
    let tool = ToolName::try_from("refund").unwrap();
    let args = json!({ "order_id": "1" });
    ClaimRequest {
        namespace: Namespace::try_from("billing").unwrap(),
        key: IdempotencyKey::try_from("k").unwrap(),
        key_source: KeySource::Body,
        fingerprint: Fingerprint::compute(&tool, &args, &[]),
        tool,
        policy: ToolPolicy::default_for_unregistered(),
        args,
        run_id: None,
        step: Some(4),
        runner: Runner::Agent,
    }
}

/// A new operation id, with the lease token `new-token`.
pub(crate) fn fresh() -> Fresh {
    Fresh {
        operation_id: Uuid::now_v7(),
        lease_token: "new-token".into(),
    }
}
