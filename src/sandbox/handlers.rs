//! The sandbox's endpoints: the provider's API (`/actions/…`) and the test controls (`/_…`).
//! Errors answer `{"error": "<message>"}`, as many real providers do.

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::connection::Connection;
use super::faults::{Call, Fault, FaultKind, FaultRequest, FaultView};
use super::state::{Begin, Effect, Found};
use super::Shared;

/// A refused call: its status and a message.
pub(super) struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

type Answer = Result<Response, Refusal>;

/// `POST /actions/{name}`: performs the action once per idempotency key.
pub(super) async fn act(
    State(state): State<Shared>,
    ConnectInfo(connection): ConnectInfo<Connection>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let key = idempotency_key(&headers)?;
    let args = if body.is_empty() {
        Value::Null
    } else {
        parse::<Value>(&body)?
    };
    // Detached, as at a real provider: a caller that gives up does not stop the work.
    tokio::spawn(perform(state, connection, name, key, args))
        .await
        .map_err(|error| Refusal(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()))
}

async fn perform(
    state: Shared,
    connection: Connection,
    name: String,
    key: Option<String>,
    args: Value,
) -> Response {
    let key = key.as_deref();
    let call = Call {
        lookup: false,
        action: &name,
        key,
    };
    let fault = state.lock().take_fault(call);
    match fault {
        Some(FaultKind::FailBeforeCommit(status)) => {
            return Refusal(status, "injected fault: fail_before_commit".into()).into_response();
        }
        Some(FaultKind::DropBeforeCommit) => {
            tracing::info!(?key, %name, "dropping the connection before committing");
            connection.kill();
            return StatusCode::INTERNAL_SERVER_ERROR.into_response(); // never written
        }
        _ => {}
    }
    let begin = state.lock().begin(key, &name, &args);
    if let Some(FaultKind::DelayBeforeCommit(delay)) = fault {
        tokio::time::sleep(delay).await;
    }
    let response = match begin {
        Begin::Fresh => {
            let effect = state.lock().commit(key, &name, args);
            tracing::info!(id = %effect.id, ?key, %name, "committed an effect");
            answer(&effect, false)
        }
        Begin::Replay(effect) => answer(&effect, true),
        Begin::Reused => Refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency key reused with different parameters".into(),
        )
        .into_response(),
        Begin::InProgress => in_progress().into_response(),
    };
    match fault {
        Some(FaultKind::DelayAfterCommit(delay)) => tokio::time::sleep(delay).await,
        Some(FaultKind::DropAfterCommit) => {
            tracing::info!(?key, %name, "dropping the connection after committing");
            connection.kill();
        }
        _ => {}
    }
    response
}

/// `200` with the effect's answer, its reference in `X-Provider-Ref`, and
/// `Idempotent-Replayed: true` when it is a replay.
fn answer(effect: &Effect, replayed: bool) -> Response {
    let mut response = Json(effect.answer()).into_response();
    let headers = response.headers_mut();
    if let Ok(reference) = HeaderValue::from_str(&effect.id) {
        headers.insert("x-provider-ref", reference);
    }
    if replayed {
        headers.insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

fn in_progress() -> Refusal {
    Refusal(
        StatusCode::CONFLICT,
        "a request with this idempotency key is in progress".into(),
    )
}

/// The query of `GET /actions/{name}/lookup`.
#[derive(Deserialize)]
pub(super) struct LookupQuery {
    key: Option<String>,
}

/// `GET /actions/{name}/lookup?key=K`: whether the key took effect.
pub(super) async fn lookup(
    State(state): State<Shared>,
    Path(name): Path<String>,
    query: Result<Query<LookupQuery>, QueryRejection>,
) -> Answer {
    let query =
        query.map_err(|rejection| Refusal(StatusCode::BAD_REQUEST, rejection.body_text()))?;
    let Some(key) = query.0.key else {
        return Err(Refusal(StatusCode::BAD_REQUEST, "missing ?key=".into()));
    };
    let call = Call {
        lookup: true,
        action: &name,
        key: Some(&key),
    };
    let fault = state.lock().take_fault(call);
    match fault {
        Some(FaultKind::LookupError(status)) => {
            return Err(Refusal(status, "injected fault: lookup_error".into()));
        }
        Some(FaultKind::LookupDelay(delay)) => tokio::time::sleep(delay).await,
        _ => {}
    }
    let found = state.lock().lookup(&name, &key);
    match found {
        Found::Effect(effect) => Ok(Json(json!({
            "found": true, "result": effect.answer(), "provider_ref": effect.id
        }))
        .into_response()),
        // Saying "not found" now could be wrong a moment later: ask again.
        Found::InProgress => Err(in_progress()),
        Found::Nothing => Ok(Json(json!({"found": false})).into_response()),
    }
}

/// `GET /_effects`.
pub(super) async fn effects(State(state): State<Shared>) -> Json<Value> {
    Json(state.lock().effects_view())
}

/// `POST /_faults`: queues a fault for the next matching call.
pub(super) async fn add_fault(State(state): State<Shared>, body: Bytes) -> Answer {
    let fault = Fault::try_from(parse::<FaultRequest>(&body)?)
        .map_err(|message| Refusal(StatusCode::BAD_REQUEST, message))?;
    let view = FaultView::from(&fault);
    state.lock().push_fault(fault);
    Ok((StatusCode::CREATED, Json(json!({"queued": view}))).into_response())
}

/// `GET /_faults`: the faults still queued.
pub(super) async fn faults(State(state): State<Shared>) -> Json<Value> {
    Json(json!({"faults": state.lock().faults_view()}))
}

/// The body of `POST /_config`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigRequest {
    ignore_idempotency_keys: bool,
}

/// `POST /_config`: switches the provider's handling of `Idempotency-Key`.
pub(super) async fn set_config(State(state): State<Shared>, body: Bytes) -> Answer {
    let config = parse::<ConfigRequest>(&body)?;
    let mut state = state.lock();
    state.set_ignore_keys(config.ignore_idempotency_keys);
    Ok(Json(state.config_view()).into_response())
}

/// `GET /_config`.
pub(super) async fn config(State(state): State<Shared>) -> Json<Value> {
    Json(state.lock().config_view())
}

/// `POST /_reset`: forgets effects, faults and configuration.
pub(super) async fn reset(State(state): State<Shared>) -> Json<Value> {
    state.lock().reset();
    Json(json!({"reset": true}))
}

/// `GET /healthz`.
pub(super) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, Refusal> {
    headers
        .get("idempotency-key")
        .map(|value| {
            value.to_str().map(str::to_owned).map_err(|_| {
                Refusal(
                    StatusCode::BAD_REQUEST,
                    "Idempotency-Key must be visible ASCII".into(),
                )
            })
        })
        .transpose()
}

fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, Refusal> {
    serde_json::from_slice(body).map_err(|error| {
        Refusal(
            StatusCode::BAD_REQUEST,
            format!("invalid JSON body: {error}"),
        )
    })
}
