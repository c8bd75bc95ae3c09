//! From what happened on the wire to an outcome class: one pure function, [`classify`], so
//! the table in docs/providers.md, "Outcome classes", is the code's table and is tested as one.
//!
//! The rule behind every row: `Failed` only when the provider certainly did nothing
//! (it never got the call, or it refused it); `Unknown` whenever it may have acted.

use app::ledger::Execution;
use serde_json::{json, Map, Value};

/// Provider bodies larger than this are left out of error values (they are stored).
const PROVIDER_BODY_LIMIT: usize = 8 * 1024;
/// How much of a provider's message or non-JSON body an error value quotes.
const EXCERPT_CHARS: usize = 300;

/// What one call to a provider came to, before classification.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The provider answered with a status and a complete body.
    Answered {
        status: u16,
        /// The `X-Provider-Ref` header.
        provider_ref: Option<String>,
        body: Vec<u8>,
    },
    /// The call failed before the request was sent: connection refused, DNS failure, a
    /// request that could not be built.
    NotSent { reason: String },
    /// No complete answer within the executor's `timeout_ms`.
    TimedOut { timeout_ms: u32 },
    /// The request was sent, then the connection broke (reset, closed without an answer)
    /// or the body failed to read (`status` is known then).
    Lost { status: Option<u16>, reason: String },
    /// The answer's body was larger than the limit, so it could not be read whole.
    TooLarge { status: u16, limit: usize },
}

/// The outcome class of an attempt (docs/providers.md, "Outcome classes").
pub fn classify(attempt: &Attempt) -> Execution {
    match attempt {
        Attempt::Answered {
            status,
            provider_ref,
            body,
        } => answered(*status, provider_ref.as_deref(), body),
        Attempt::NotSent { reason } => Execution::Failed {
            error: error_value(
                "connection_failed",
                format!("the provider could not be reached; nothing was sent: {reason}"),
                None,
                None,
            ),
            retryable: true,
        },
        Attempt::TimedOut { timeout_ms } => Execution::Unknown {
            error: error_value(
                "timeout",
                format!("the provider did not answer within {timeout_ms} ms; it may have acted"),
                None,
                None,
            ),
        },
        Attempt::Lost { status, reason } => Execution::Unknown {
            error: error_value(
                "connection_lost",
                format!(
                    "the connection broke after the call was sent; it may have acted: {reason}"
                ),
                *status,
                None,
            ),
        },
        Attempt::TooLarge { status, limit } => Execution::Unknown {
            error: error_value(
                "response_too_large",
                format!("the provider's answer is larger than {limit} bytes and was not read"),
                Some(*status),
                None,
            ),
        },
    }
}

fn answered(status: u16, header_ref: Option<&str>, body: &[u8]) -> Execution {
    if (200..300).contains(&status) {
        let result = result_of(body);
        let provider_ref = reference_in(&result).or_else(|| non_empty(header_ref));
        return Execution::Succeeded {
            result,
            provider_ref,
        };
    }
    let (code, what) = match status {
        409 => (
            "provider_conflict",
            "is still processing a call with this key",
        ),
        429 => (
            "provider_rate_limited",
            "asked us to slow down; nothing was done",
        ),
        400..=499 => ("provider_rejected", "refused the call"),
        500..=599 => ("provider_error", "failed; it may have acted"),
        _ => ("provider_unexpected_status", "gave an unexpected answer"),
    };
    let status_text = match http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
    {
        Some(reason) => format!("{status} {reason}"),
        None => status.to_string(),
    };
    let mut message = format!("the provider {what} ({status_text})");
    if let Some(said) = serde_json::from_slice(body).ok().as_ref().and_then(said_by) {
        message = format!("{message}: {}", excerpt(said));
    }
    let error = error_value(code, message, Some(status), Some(body));
    match status {
        429 => Execution::Failed {
            error,
            retryable: true,
        },
        400..=499 if status != 409 => Execution::Failed {
            error,
            retryable: false,
        },
        _ => Execution::Unknown { error },
    }
}

/// The body as JSON; a body that is not JSON as a JSON string; an empty body as null.
fn result_of(body: &[u8]) -> Value {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// The provider's reference in an answer: its `provider_ref`, else its `id` (a number as
/// its decimal digits).
pub(super) fn reference_in(answer: &Value) -> Option<String> {
    let text = |value: &Value| match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let field = |name| answer.get(name).and_then(text);
    field("provider_ref").or_else(|| field("id"))
}

fn non_empty(text: Option<&str>) -> Option<String> {
    text.filter(|s| !s.is_empty()).map(str::to_owned)
}

/// What a provider's error body says in words: `error` or `message`, or `error.message`.
fn said_by(body: &Value) -> Option<&str> {
    body.get("error")
        .and_then(Value::as_str)
        .or_else(|| body.get("message").and_then(Value::as_str))
        .or_else(|| body.pointer("/error/message").and_then(Value::as_str))
}

/// `{"code", "message", "http_status"?, "provider_body"? | "provider_text"?}`.
fn error_value(code: &str, message: String, status: Option<u16>, body: Option<&[u8]>) -> Value {
    let mut error = Map::new();
    error.insert("code".into(), json!(code));
    error.insert("message".into(), json!(message));
    if let Some(status) = status {
        error.insert("http_status".into(), json!(status));
    }
    if let Some(body) = body.filter(|b| !b.is_empty() && b.len() <= PROVIDER_BODY_LIMIT) {
        match serde_json::from_slice::<Value>(body) {
            Ok(json) => error.insert("provider_body".into(), json),
            Err(_) => error.insert(
                "provider_text".into(),
                json!(excerpt(&String::from_utf8_lossy(body))),
            ),
        };
    }
    Value::Object(error)
}

fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
