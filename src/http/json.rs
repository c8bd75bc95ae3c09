//! `AppJson`: axum's `Json` with our error shape. Malformed JSON and wrong types are 400
//! (axum would answer 422, which the contract reserves for reusing a key), an oversized body
//! is 413, and a body not declared as JSON is 415.

use axum::body::{Body, Bytes};
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
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

/// A JSON body whose every field may be left out (a verdict's or an expiry's reason): no body
/// at all reads as `{}`, so `POST …/approve` with nothing but credentials is an approval.
/// A body that is there is read exactly as [`AppJson`] reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct OptionalJson<T>(pub T);

impl<T, S> FromRequest<S> for OptionalJson<T>
where
    T: DeserializeOwned + Default,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        let headers = parts.headers.clone();
        // Read through the extractor (not the raw body) so that the body limit still holds.
        let bytes = Bytes::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(|rejection| match rejection.status() {
                StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
                _ => ApiError::bad_request("invalid_request", rejection.body_text()),
            })?;
        if bytes.is_empty() {
            return Ok(Self(T::default()));
        }
        let mut request = Request::new(Body::from(bytes));
        *request.headers_mut() = headers;
        let AppJson(value) = AppJson::<T>::from_request(request, state).await?;
        Ok(Self(value))
    }
}
