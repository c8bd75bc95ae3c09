//! Reconcile lookups, the pure parts: the URL to ask and what the answer means.
//!
//! The provider answers `GET reconcile_url?key=<key>` with `{"found": true, "result": …,
//! "provider_ref": …}` or `{"found": false}`; anything else is a [`LookupError`], which
//! means "ask again later", never "not found".

use app::ledger::{Lookup, LookupError};
use reqwest::Url;
use serde_json::Value;

use super::classify::reference_in;

/// `reconcile_url` with `key=<key>` added to its query (after `&` if it has one).
pub fn lookup_url(reconcile_url: Option<&str>, key: &str) -> Result<Url, LookupError> {
    let reconcile_url = reconcile_url.ok_or_else(|| {
        LookupError("the tool has no executor.reconcile_url to ask the provider".into())
    })?;
    let mut url = Url::parse(reconcile_url)
        .map_err(|error| LookupError(format!("executor.reconcile_url is not a URL: {error}")))?;
    url.query_pairs_mut().append_pair("key", key);
    Ok(url)
}

/// What the provider's answer says about the key.
pub fn parse_lookup(status: u16, body: &[u8]) -> Result<Lookup, LookupError> {
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(body);
        let text: String = text.trim().chars().take(200).collect();
        return Err(LookupError(format!(
            "the provider answered the lookup with {status}: {text}"
        )));
    }
    let answer: Value = serde_json::from_slice(body).map_err(|error| {
        LookupError(format!("the provider's lookup answer is not JSON: {error}"))
    })?;
    match answer.get("found").and_then(Value::as_bool) {
        Some(true) => {
            let result = answer.get("result").cloned().unwrap_or(Value::Null);
            let provider_ref = reference_of(&answer).or_else(|| reference_in(&result));
            Ok(Lookup::Found {
                result,
                provider_ref,
            })
        }
        Some(false) => Ok(Lookup::NotFound),
        None => Err(LookupError(
            "the provider's lookup answer has no boolean \"found\"".into(),
        )),
    }
}

/// The answer's own `provider_ref` (not its `id`, which names nothing here).
fn reference_of(answer: &Value) -> Option<String> {
    match answer.get("provider_ref")? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_key_is_added_to_the_query_encoded() {
        let cases = [
            ("http://p/lookup", "k1", "http://p/lookup?key=k1"),
            (
                "http://p/lookup?account=a",
                "refund:{\"id\":\"1 2\"}&x",
                "http://p/lookup?account=a&key=refund%3A%7B%22id%22%3A%221+2%22%7D%26x",
            ),
        ];
        for (base, key, expected) in cases {
            assert_eq!(lookup_url(Some(base), key).unwrap().as_str(), expected);
        }
        assert!(lookup_url(None, "k")
            .unwrap_err()
            .0
            .contains("reconcile_url"));
        assert!(lookup_url(Some("not a url"), "k").is_err());
    }

    #[test]
    fn answers_mean_found_not_found_or_ask_again() {
        let found = |result: Value, provider_ref: Option<&str>| {
            Ok(Lookup::Found {
                result,
                provider_ref: provider_ref.map(str::to_owned),
            })
        };
        let rows = [
            (
                200,
                json!({"found": true, "result": {"id": "ch_1"}, "provider_ref": "re_1"}),
                found(json!({"id": "ch_1"}), Some("re_1")),
            ),
            (
                200,
                json!({"found": true, "result": {"id": "ch_1"}}),
                found(json!({"id": "ch_1"}), Some("ch_1")),
            ),
            (200, json!({"found": true}), found(Value::Null, None)),
            (200, json!({"found": false}), Ok(Lookup::NotFound)),
        ];
        for (status, body, expected) in rows {
            let body = serde_json::to_vec(&body).unwrap();
            assert_eq!(parse_lookup(status, &body), expected);
        }
        let errors: [(u16, &[u8], &str); 5] = [
            (503, b"{\"error\":\"down\"}", "503"),
            (404, b"", "404"),
            (200, b"<html>", "not JSON"),
            (200, b"{\"found\":\"yes\"}", "\"found\""),
            (200, b"[]", "\"found\""),
        ];
        for (status, body, says) in errors {
            let error = parse_lookup(status, body).unwrap_err();
            assert!(error.0.contains(says), "{status}: {error}");
        }
    }
}
