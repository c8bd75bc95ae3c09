//! `AppJson`: axum's `Json` with our error shape. Malformed JSON and wrong types are 400
//! (axum would answer 422, which the contract reserves for reusing a key), an oversized body
//! is 413, and a body not declared as JSON is 415.

use axum::extract::rejection::JsonRejection;
use axum::extract::FromRequest;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use super::error::ApiError;

/// JSON in, JSON out, errors in the contract's shape.
#[derive(Debug, Clone, Copy, Default, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct AppJson<T>(pub T);

impl<T: Serialize> IntoResponse for AppJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match rejection {
            JsonRejection::JsonDataError(error) => ApiError::BadRequest {
                code: "invalid_request",
                message: format!(
                    "the body does not match the expected shape: {}",
                    error.body_text()
                ),
                details: json!({}),
            },
            JsonRejection::JsonSyntaxError(error) => ApiError::BadRequest {
                code: "malformed_json",
                message: format!("the body is not valid JSON: {}", error.body_text()),
                details: json!({}),
            },
            JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType,
            JsonRejection::BytesRejection(error)
                if error.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                ApiError::PayloadTooLarge
            }
            other => ApiError::bad_request("invalid_request", other.body_text()),
        }
    }
}
