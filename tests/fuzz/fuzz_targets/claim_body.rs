//! A claim body, as `POST /v1/operations` parses it, through the ledger's preparation
//! (`check_request`, `prepare_claim`): key choice, fingerprint, redaction.
//!
//! Input: the body's bytes, then optionally `0xFF` and the `Idempotency-Key` header, then
//! optionally `0xFF` and the tool's policy as JSON.

#![no_main]

use app::domain::{Fingerprint, Namespace, ToolPolicy, MAX_KEY_LEN};
use app::ledger::{check_request, prepare_claim, LedgerError, SentClaim};
use idem_fuzz::assert_no_card_numbers;
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde_json::Value;

/// The claim body, field for field as the server's `ClaimBody` declares it.
#[derive(Deserialize)]
struct ClaimBody {
    tool: String,
    args: Value,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    business_key: Option<String>,
    #[serde(default)]
    run_id: Option<String>,
    #[serde(default)]
    step: Option<u64>,
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |byte| *byte == 0xFF);
    let body = parts.next().unwrap_or_default();
    // The server reads the header as visible ASCII or refuses it.
    let header = parts
        .next()
        .and_then(|h| std::str::from_utf8(h).ok())
        .map(str::to_owned);
    let policy = parts
        .next()
        .and_then(|p| serde_json::from_slice::<ToolPolicy>(p).ok())
        .filter(|p| p.validate().is_ok())
        .unwrap_or_else(ToolPolicy::default_for_unregistered);
    let Ok(body) = serde_json::from_slice::<ClaimBody>(body) else {
        return;
    };
    let request = SentClaim {
        tool: body.tool,
        args: body.args,
        header_key: header,
        body_key: body.key,
        business_key: body.business_key,
        run_id: body.run_id,
        step: body.step,
    };
    let Ok(tool) = check_request(&request) else {
        return;
    };
    let args = request.args.clone();
    let namespace = Namespace::try_from("fuzz").expect("a valid namespace");
    match prepare_claim(&namespace, tool.clone(), request, policy.clone()) {
        Ok(claim) => {
            let expected = Fingerprint::compute(&tool, &args, &policy.ignore_fields);
            assert_eq!(claim.fingerprint, expected);
            assert!(claim.key.as_str().len() <= MAX_KEY_LEN);
            assert_no_card_numbers(&claim.args);
        }
        Err(LedgerError::Invalid { .. }) => {}
        Err(other) => panic!("preparing a claim failed otherwise than as invalid: {other}"),
    }
});
