//! The outcome table, row by row.

use super::*;

fn answered(status: u16, header: Option<&str>, body: &str) -> Attempt {
    Attempt::Answered {
        status,
        provider_ref: header.map(str::to_owned),
        body: body.as_bytes().to_vec(),
    }
}

/// An outcome class, its `retryable` and its error code, as the table writes them.
type Class = (&'static str, Option<bool>, Option<&'static str>);

/// The class of an execution and its error code, for the table.
fn class(execution: &Execution) -> (&'static str, Option<bool>, Option<String>) {
    let code = |error: &Value| error["code"].as_str().map(str::to_owned);
    match execution {
        Execution::Succeeded { .. } => ("succeeded", None, None),
        Execution::Failed { error, retryable } => ("failed", Some(*retryable), code(error)),
        Execution::Unknown { error } => ("unknown", None, code(error)),
    }
}

#[test]
fn every_row_of_the_outcome_table() {
    let lost = |status| Attempt::Lost {
        status,
        reason: "connection closed before message completed".into(),
    };
    let rows: Vec<(Attempt, Class)> = vec![
        (answered(200, None, "{}"), ("succeeded", None, None)),
        (answered(201, None, ""), ("succeeded", None, None)),
        (answered(204, None, ""), ("succeeded", None, None)),
        (
            answered(409, None, "{}"),
            ("unknown", None, Some("provider_conflict")),
        ),
        (
            answered(429, None, ""),
            ("failed", Some(true), Some("provider_rate_limited")),
        ),
        (
            answered(400, None, ""),
            ("failed", Some(false), Some("provider_rejected")),
        ),
        (
            answered(404, None, ""),
            ("failed", Some(false), Some("provider_rejected")),
        ),
        (
            answered(422, None, ""),
            ("failed", Some(false), Some("provider_rejected")),
        ),
        (
            answered(500, None, ""),
            ("unknown", None, Some("provider_error")),
        ),
        (
            answered(503, None, ""),
            ("unknown", None, Some("provider_error")),
        ),
        (
            answered(302, None, ""),
            ("unknown", None, Some("provider_unexpected_status")),
        ),
        (
            Attempt::NotSent {
                reason: "connection refused".into(),
            },
            ("failed", Some(true), Some("connection_failed")),
        ),
        (
            Attempt::TimedOut { timeout_ms: 100 },
            ("unknown", None, Some("timeout")),
        ),
        (lost(None), ("unknown", None, Some("connection_lost"))),
        (lost(Some(200)), ("unknown", None, Some("connection_lost"))),
        (
            Attempt::TooLarge {
                status: 200,
                limit: 10,
            },
            ("unknown", None, Some("response_too_large")),
        ),
    ];
    for (attempt, (kind, retryable, code)) in rows {
        let got = class(&classify(&attempt));
        assert_eq!(
            (got.0, got.1, got.2.as_deref()),
            (kind, retryable, code),
            "{attempt:?}"
        );
    }
}

#[test]
fn a_success_carries_the_body_and_the_providers_reference() {
    let rows = [
        (
            answered(200, Some("hdr"), r#"{"id":"ch_1","provider_ref":"re_1"}"#),
            json!({"id":"ch_1","provider_ref":"re_1"}),
            Some("re_1"),
        ),
        (
            answered(200, Some("hdr"), r#"{"id":"ch_1"}"#),
            json!({"id":"ch_1"}),
            Some("ch_1"),
        ),
        (
            answered(200, Some("hdr"), r#"{"id":42}"#),
            json!({"id":42}),
            Some("42"),
        ),
        (
            answered(200, Some("hdr"), r#"{"id":null,"ok":true}"#),
            json!({"id":null,"ok":true}),
            Some("hdr"),
        ),
        (answered(200, None, r#"[1,2]"#), json!([1, 2]), None),
        (
            answered(200, Some("hdr"), "queued"),
            json!("queued"),
            Some("hdr"),
        ),
        (answered(204, None, ""), Value::Null, None),
        (answered(200, Some(""), " \n"), Value::Null, None),
    ];
    for (attempt, result, provider_ref) in rows {
        assert_eq!(
            classify(&attempt),
            Execution::Succeeded {
                result,
                provider_ref: provider_ref.map(str::to_owned)
            },
            "{attempt:?}"
        );
    }
}

#[test]
fn a_refusal_quotes_the_provider_within_bounds() {
    let Execution::Failed { error, .. } = classify(&answered(
        400,
        None,
        r#"{"error":"amount must be positive"}"#,
    )) else {
        panic!("400 is a failure");
    };
    assert_eq!(
        error,
        json!({
            "code": "provider_rejected",
            "message": "the provider refused the call (400 Bad Request): amount must be positive",
            "http_status": 400,
            "provider_body": {"error": "amount must be positive"},
        })
    );

    let Execution::Unknown { error } = classify(&answered(502, None, "<html>bad gateway</html>"))
    else {
        panic!("5xx is unknown");
    };
    assert_eq!(error["provider_text"], "<html>bad gateway</html>");
    assert!(error.get("provider_body").is_none());

    let huge = format!(r#"{{"error":"{}"}}"#, "x".repeat(PROVIDER_BODY_LIMIT));
    let Execution::Failed { error, .. } = classify(&answered(422, None, &huge)) else {
        panic!("422 is a failure");
    };
    assert!(error.get("provider_body").is_none() && error.get("provider_text").is_none());
    let message = error["message"].as_str().unwrap();
    assert!(message.ends_with('…') && message.len() < 500, "{message}");
}

#[test]
fn the_same_attempt_always_gets_the_same_outcome() {
    let attempt = answered(503, Some("r"), r#"{"message":"try later"}"#);
    assert_eq!(classify(&attempt), classify(&attempt.clone()));
}
