//! What the derive cannot say, added to the generated document so that it is exact: the
//! patterns of the names the server checks, and the answers any operation may give besides
//! its own (rate limits, a database out of reach, a session that must change its password,
//! a body that is not JSON). A client generated from the document then expects every
//! status it can meet; `make contract` checks both against the running server.

use app::identity::MIN_PASSWORD_LENGTH;
use serde_json::{json, Map, Value};

/// The names checked at the edge (`app::domain`), as JSON Schema patterns; each component
/// schema of that name gets its pattern and length bounds.
const NAME_PATTERNS: [(&str, &str, u32); 4] = [
    ("Namespace", "^[A-Za-z0-9_.-]{1,64}$", 64),
    ("Username", "^[A-Za-z0-9_.@-]{1,64}$", 64),
    ("ToolName", "^[A-Za-z0-9_.:-]{1,128}$", 128),
    ("IdempotencyKey", "^[ -~]{1,255}$", 255),
];

/// Gives each checked name's component schema its pattern and bounds.
pub(super) fn state_name_patterns(document: &mut Value) {
    let schemas = &mut document["components"]["schemas"];
    for (name, pattern, max_length) in NAME_PATTERNS {
        if let Some(schema) = schemas.get_mut(name).and_then(Value::as_object_mut) {
            schema.insert("pattern".into(), json!(pattern));
            schema.insert("minLength".into(), json!(1));
            schema.insert("maxLength".into(), json!(max_length));
        }
    }
}

/// A dotted path into the arguments (`card.number`): parts that are not empty.
const DOTTED_PATH: &str = r"^[^.]+(\.[^.]+)*$";

/// An executor's URLs: `http://` or `https://` and something after it.
const HTTP_URL: &str = "^[Hh][Tt][Tt][Pp][Ss]?://.";

/// What a list's `cursor` looks like: `c1_` and the id of the last item shown (or empty).
const CURSOR: &str = "^(c1_([0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-\
                      [0-9a-fA-F]{4}-[0-9a-fA-F]{12}))?$";

/// Rules of single fields that the server checks beyond their type.
pub(super) fn state_field_rules(document: &mut Value) {
    let schemas = &mut document["components"]["schemas"];
    let password = json!({ "minLength": MIN_PASSWORD_LENGTH });
    merge(
        &mut schemas["CreateUserRequest"]["properties"]["password"],
        &password,
    );
    merge(
        &mut schemas["ChangePasswordRequest"]["properties"]["new_password"],
        &password,
    );
    for list in ["key_fields", "ignore_fields", "redact_fields"] {
        let items = &mut schemas["ToolPolicy"]["properties"][list]["items"];
        merge(items, &json!({ "pattern": DOTTED_PATH }));
    }
    let executor = &mut schemas["ExecutorConfig"]["properties"];
    merge(&mut executor["url"], &json!({ "pattern": HTTP_URL }));
    merge(
        &mut executor["reconcile_url"],
        &json!({ "pattern": HTTP_URL }),
    );
    merge(
        &mut executor["timeout_ms"],
        &json!({ "minimum": 1, "maximum": 300_000 }),
    );
    // A change of a person says what changes: at least one of the two not null.
    merge(
        &mut schemas["UpdateUserRequest"],
        &json!({ "anyOf": [
            { "required": ["disabled"], "properties": { "disabled": { "type": "boolean" } } },
            { "required": ["role"], "properties": { "role": { "$ref": "#/components/schemas/Role" } } },
        ] }),
    );
}

/// Query filters: a name filter left empty filters nothing (as a form sends it), and a
/// cursor is one the server gave out.
pub(super) fn state_query_rules(document: &mut Value) {
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    let operations = paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|operations| operations.values_mut());
    for operation in operations {
        let Some(parameters) = operation
            .get_mut("parameters")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for parameter in parameters.iter_mut().filter(|p| p["in"] == "query") {
            if parameter["name"] == "cursor" && parameter["schema"]["pattern"].is_null() {
                parameter["schema"] = json!({ "type": "string", "pattern": CURSOR });
            } else if let Some(pattern) = name_pattern_of(&parameter["schema"]) {
                parameter["schema"] = json!({ "type": "string", "pattern": pattern });
            }
        }
    }
}

/// For a schema that is one of the checked names: its pattern, with the empty text allowed.
fn name_pattern_of(schema: &Value) -> Option<String> {
    let reference = schema["$ref"].as_str()?;
    let (_, pattern, max_length) = NAME_PATTERNS
        .iter()
        .find(|(name, _, _)| reference.strip_prefix("#/components/schemas/") == Some(*name))?;
    Some(pattern.replace(
        &format!("{{1,{max_length}}}"),
        &format!("{{0,{max_length}}}"),
    ))
}

/// Adds the keys of `rules` to `schema` (an object).
fn merge(schema: &mut Value, rules: &Value) {
    if let (Some(schema), Some(rules)) = (schema.as_object_mut(), rules.as_object()) {
        for (key, value) in rules {
            schema.insert(key.clone(), value.clone());
        }
    }
}

/// Paths that answer without touching the database or anyone's credentials.
const STATIC_PATHS: [&str; 2] = ["/healthz", "/v1/openapi.json"];

/// Adds to every operation the answers it may give that its own list leaves out.
pub(super) fn list_common_answers(document: &mut Value) {
    let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, operations) in paths.iter_mut() {
        if STATIC_PATHS.contains(&path.as_str()) {
            continue;
        }
        let Some(operations) = operations.as_object_mut() else {
            continue;
        };
        for operation in operations.values_mut() {
            for (status, description) in common_answers(path, operation) {
                add_answer(operation, status, description);
            }
        }
    }
}

/// The statuses `operation` of `path` may answer whatever it does.
fn common_answers(path: &str, operation: &Value) -> Vec<(&'static str, &'static str)> {
    let secured = |scheme: &str| {
        operation["security"]
            .as_array()
            .is_some_and(|all| all.iter().any(|one| one.get(scheme).is_some()))
    };
    let mut answers = vec![
        (
            "500",
            "`internal_error`: a failure of ours (the cause is in the log)",
        ),
        (
            "503",
            "`database_unavailable` (with `Retry-After`): the database cannot be reached for \
             now; nothing was changed, the same request may succeed later",
        ),
    ];
    if secured("api_key") || secured("session") || path == "/auth/login" {
        answers.push((
            "429",
            "`too_many_requests` (with `Retry-After`): an API key over its rate limit or its \
             caps on waiting requests (`Prefer: wait`) and change streams, the server's cap on \
             change streams, or too many failed sign-ins",
        ));
    }
    if secured("api_key") || secured("session") {
        answers.push((
            "403",
            "`forbidden` (the caller's role, or a person on a route for agents), \
             `password_change_required` (a person must first replace a generated password) or \
             `cross_site_request` (a session's change sent from another site)",
        ));
    }
    if secured("api_key") || secured("session") {
        answers.push(("401", "`unauthorized`: no credentials, or invalid ones"));
    }
    if operation.get("requestBody").is_some() {
        answers.push(("400", "`malformed_json` or `invalid_request`"));
        answers.push(("413", "`payload_too_large`: over `IDEM_MAX_BODY_BYTES`"));
        answers.push((
            "415",
            "`unsupported_media_type`: the body is not declared `application/json`",
        ));
    }
    answers
}

/// Lists `status` with the contract's error body, unless the operation lists it already.
fn add_answer(operation: &mut Value, status: &str, description: &str) {
    let Some(responses) = operation
        .get_mut("responses")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if responses.contains_key(status) {
        return;
    }
    let mut answer = Map::new();
    answer.insert("description".into(), json!(description));
    answer.insert(
        "content".into(),
        json!({ "application/json": { "schema": { "$ref": "#/components/schemas/ErrorBody" } } }),
    );
    responses.insert(status.to_owned(), Value::Object(answer));
}
