//! Canonical JSON (RFC 8785), fingerprints, depth and redaction on any JSON text.

#![no_main]

use app::domain::{canonical_json, check_depth, depth, redact, Fingerprint, ToolName, MAX_DEPTH};
use idem_fuzz::assert_no_card_numbers;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let canonical = canonical_json(&value);
    // The canonical form is JSON that means the same: it canonicalizes to itself and has the
    // same fingerprint and depth.
    let reparsed: Value = serde_json::from_str(&canonical).expect("canonical JSON parses");
    assert_eq!(canonical_json(&reparsed), canonical, "JCS is idempotent");
    assert_eq!(depth(&reparsed), depth(&value));
    assert_eq!(
        check_depth(&value, MAX_DEPTH).is_ok(),
        depth(&value) <= MAX_DEPTH
    );
    let tool = ToolName::try_from("fuzz").expect("a valid tool name");
    assert_eq!(
        Fingerprint::compute(&tool, &reparsed, &[]),
        Fingerprint::compute(&tool, &value, &[])
    );
    let redacted = redact(&value, &[]);
    assert_no_card_numbers(&redacted);
    assert_eq!(redact(&redacted, &[]), redacted, "redaction is idempotent");
});
