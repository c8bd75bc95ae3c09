//! The shared test vectors of `clients/test-vectors.json`: the clients reproduce canonical JSON,
//! fingerprints and keys from that file, and these tests prove the server agrees with every entry.

use serde::Deserialize;
use serde_json::Value;

use super::{
    business_key_from_fields, canonical_json, Fingerprint, KeyChoice, ToolName, ToolPolicy,
};

const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../clients/test-vectors.json"
));

#[derive(Deserialize)]
struct Vectors {
    canonical_json: Vec<CanonicalCase>,
    fingerprints: Vec<FingerprintCase>,
    derived_keys: Vec<DerivedKeyCase>,
    business_keys: Vec<BusinessKeyCase>,
}

#[derive(Deserialize)]
struct CanonicalCase {
    name: String,
    input: String,
    canonical: String,
}

#[derive(Deserialize)]
struct FingerprintCase {
    name: String,
    tool: String,
    args: String,
    ignore_fields: Vec<String>,
    fingerprint: String,
}

#[derive(Deserialize)]
struct DerivedKeyCase {
    name: String,
    run_id: String,
    step: u64,
    tool: String,
    args: String,
    ignore_fields: Vec<String>,
    key: String,
}

#[derive(Deserialize)]
struct BusinessKeyCase {
    name: String,
    tool: String,
    args: String,
    key_fields: Vec<String>,
    redact_fields: Vec<String>,
    key: String,
}

fn vectors() -> Vectors {
    serde_json::from_str(VECTORS).expect("clients/test-vectors.json parses")
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("every input of the vectors is JSON")
}

fn tool(name: &str) -> ToolName {
    ToolName::try_from(name).expect("every tool of the vectors is a valid name")
}

#[test]
fn canonical_json_agrees_with_the_shared_vectors() {
    for case in vectors().canonical_json {
        assert_eq!(
            canonical_json(&parse(&case.input)),
            case.canonical,
            "{}",
            case.name
        );
    }
}

#[test]
fn fingerprints_agree_with_the_shared_vectors() {
    for case in vectors().fingerprints {
        let actual =
            Fingerprint::compute(&tool(&case.tool), &parse(&case.args), &case.ignore_fields);
        assert_eq!(actual.as_str(), case.fingerprint, "{}", case.name);
    }
}

#[test]
fn derived_keys_agree_with_the_shared_vectors() {
    for case in vectors().derived_keys {
        let policy = ToolPolicy {
            ignore_fields: case.ignore_fields.clone(),
            ..ToolPolicy::default()
        };
        let choice = KeyChoice {
            run_id: Some(&case.run_id),
            step: Some(case.step),
            ..KeyChoice::default()
        };
        let (key, _) = choice
            .resolve(&tool(&case.tool), &parse(&case.args), &policy)
            .expect("a run id and a step always derive a key");
        assert_eq!(key.as_str(), case.key, "{}", case.name);
    }
}

#[test]
fn business_keys_agree_with_the_shared_vectors() {
    for case in vectors().business_keys {
        let key = business_key_from_fields(
            &tool(&case.tool),
            &parse(&case.args),
            &case.key_fields,
            &case.redact_fields,
        )
        .expect("every key field of the vectors is present");
        assert_eq!(key.as_str(), case.key, "{}", case.name);
    }
}
