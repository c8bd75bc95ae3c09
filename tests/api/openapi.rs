//! `GET /v1/openapi.json`: the contract as OpenAPI 3, generated from the handlers.

use serde_json::Value;
use std::collections::BTreeSet;

use crate::helpers::{Db, TestApp};

/// Every REST route the server has, as the `router()` of each module in `src/http` declares
/// it. A new route must be added here, and then to the document, or this test fails.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("post", "/auth/login"),
    ("post", "/auth/logout"),
    ("get", "/auth/me"),
    ("get", "/v1/keys"),
    ("post", "/v1/keys"),
    ("delete", "/v1/keys/{id}"),
    ("get", "/v1/users"),
    ("post", "/v1/users"),
    ("patch", "/v1/users/{id}"),
    ("delete", "/v1/users/{id}"),
    ("post", "/auth/password"),
    ("get", "/v1/audit"),
    ("post", "/v1/operations"),
    ("get", "/v1/operations"),
    ("get", "/v1/operations/changes"),
    ("get", "/v1/operations/export"),
    ("get", "/v1/operations/{id}"),
    ("get", "/v1/operations/{id}/events"),
    ("post", "/v1/operations/{id}/complete"),
    ("post", "/v1/operations/{id}/unknown"),
    ("post", "/v1/operations/{id}/approve"),
    ("post", "/v1/operations/{id}/reject"),
    ("post", "/v1/operations/{id}/reconcile"),
    ("post", "/v1/operations/{id}/resolve"),
    ("post", "/v1/operations/{id}/expire"),
    ("post", "/v1/tools/{name}/invoke"),
    ("get", "/v1/tools"),
    ("get", "/v1/tools/{name}"),
    ("put", "/v1/tools/{name}"),
    ("get", "/v1/metrics"),
    ("get", "/v1/metrics/tools"),
    ("get", "/metrics"),
    ("get", "/v1/openapi.json"),
];

const METHODS: [&str; 5] = ["get", "post", "put", "delete", "patch"];

async fn document(app: &TestApp) -> Value {
    let response = app.anonymous().get("/v1/openapi.json").await;
    assert_eq!(response.status(), 200, "the document is public");
    response.json().await.expect("the document is JSON")
}

#[tokio::test]
async fn the_document_is_openapi_3_and_lists_every_route_with_its_methods() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let doc = document(&app).await;

    let version = doc["openapi"].as_str().unwrap_or_default();
    assert!(version.starts_with("3."), "openapi: {version:?}");
    let paths = doc["paths"].as_object().expect("paths");
    let expected: BTreeSet<&str> = ROUTES.iter().map(|(_, path)| *path).collect();
    let documented: BTreeSet<&str> = paths.keys().map(String::as_str).collect();
    assert_eq!(documented, expected, "documented paths");
    for path in expected {
        let served: BTreeSet<&str> = ROUTES
            .iter()
            .filter(|(_, p)| *p == path)
            .map(|(method, _)| *method)
            .collect();
        let listed: BTreeSet<&str> = METHODS
            .into_iter()
            .filter(|method| paths[path].get(*method).is_some())
            .collect();
        assert_eq!(listed, served, "methods of {path}");
    }
    let ids: BTreeSet<&str> = ROUTES
        .iter()
        .filter_map(|(method, path)| paths[*path][*method]["operationId"].as_str())
        .collect();
    assert_eq!(ids.len(), ROUTES.len(), "operationIds are unique: {ids:?}");
}

/// Keeps `ROUTES` true to the router: each listed method is served, the others are 405.
#[tokio::test]
async fn the_routes_listed_here_are_the_ones_the_server_serves() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let client = app.anonymous();
    let paths: BTreeSet<&str> = ROUTES.iter().map(|(_, path)| *path).collect();
    for path in paths {
        let url = client.url(
            &path
                .replace("{id}", &uuid::Uuid::new_v4().to_string())
                .replace("{name}", "refund"),
        );
        for method in METHODS {
            let request = client
                .http
                .request(method.to_uppercase().parse().unwrap(), &url);
            let status = request.send().await.unwrap().status().as_u16();
            if ROUTES.contains(&(method, path)) {
                // Without credentials a served route answers 401, or its own answer; never
                // the fallback's 404 or the router's 405.
                assert!(
                    ![404, 405].contains(&status),
                    "{method} {path} is not served: {status}"
                );
            } else {
                assert_eq!(status, 405, "{method} {path} is served but not listed");
            }
        }
    }
}

#[tokio::test]
async fn the_claim_documents_every_status_of_the_contract() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let doc = document(&app).await;

    let claim = &doc["paths"]["/v1/operations"]["post"];
    let responses = claim["responses"].as_object().expect("responses");
    for status in ["201", "202", "200", "409", "422", "400", "413"] {
        let response = responses
            .get(status)
            .unwrap_or_else(|| panic!("POST /v1/operations documents no {status}"));
        assert!(
            response["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty()),
            "{status} has no description"
        );
        assert!(
            response["content"]["application/json"]["schema"].is_object(),
            "{status} has no body"
        );
    }
    assert_eq!(
        responses["409"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
    assert_eq!(claim["security"], serde_json::json!([{ "api_key": [] }]));
}

#[tokio::test]
async fn the_op_schema_has_the_fields_of_the_contract_and_no_lease() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];

    let op = schemas["Op"]["properties"]
        .as_object()
        .expect("an Op schema");
    let fields: BTreeSet<&str> = op.keys().map(String::as_str).collect();
    let contract: BTreeSet<&str> = [
        "id",
        "namespace",
        "key",
        "key_source",
        "tool",
        "effect",
        "fingerprint",
        "provider_key",
        "args",
        "run_id",
        "step",
        "status",
        "attempt",
        "result",
        "error",
        "retryable",
        "provider_ref",
        "created_at",
        "updated_at",
        "completed_at",
        "expires_at",
        "approval",
    ]
    .into();
    // The contract's fields, plus this server's documented extension.
    let extensions: BTreeSet<&str> = [
        "approval_expires_at",
        "runner",
        "unknown_since",
        "reconcile_attempts",
        "next_reconcile_at",
    ]
    .into();
    assert_eq!(fields, &contract | &extensions);

    for newtype in [
        "Namespace",
        "IdempotencyKey",
        "ToolName",
        "Fingerprint",
        "Username",
    ] {
        assert_eq!(schemas[newtype]["type"], "string", "{newtype}");
    }
    let error = &schemas["ErrorBody"]["properties"]["error"];
    assert_eq!(error["$ref"], "#/components/schemas/ErrorDetail");
    let detail = schemas["ErrorDetail"]["properties"].as_object().unwrap();
    let detail: BTreeSet<&str> = detail.keys().map(String::as_str).collect();
    assert_eq!(detail, ["code", "details", "message"].into());
}

#[tokio::test]
async fn agents_use_a_bearer_key_and_people_the_session_cookie() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let doc = document(&app).await;

    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["api_key"]["type"], "http");
    assert_eq!(schemes["api_key"]["scheme"], "bearer");
    assert_eq!(schemes["session"]["type"], "apiKey");
    assert_eq!(schemes["session"]["in"], "cookie");
    assert_eq!(schemes["session"]["name"], "idem_session");
    let security = |method: &str, path: &str| doc["paths"][path][method]["security"].clone();
    assert_eq!(
        security("put", "/v1/tools/{name}"),
        serde_json::json!([{ "session": [] }])
    );
    assert_eq!(
        security("get", "/v1/operations/{id}"),
        serde_json::json!([{ "api_key": [] }, { "session": [] }])
    );
    assert!(security("get", "/healthz").is_null());
}

/// The properties of a schema, following `allOf` and `$ref`s into components.
fn properties(schemas: &Value, schema: &Value) -> BTreeSet<String> {
    if let Some(name) = schema["$ref"].as_str() {
        let name = name.trim_start_matches("#/components/schemas/");
        return properties(schemas, &schemas[name]);
    }
    let mut fields: BTreeSet<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for part in schema["allOf"].as_array().into_iter().flatten() {
        fields.extend(properties(schemas, part));
    }
    fields
}

#[tokio::test]
async fn the_metrics_schema_has_the_fields_of_the_contract() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let counters = [
        "duplicates_prevented",
        "in_flight_rejected",
        "mismatches_rejected",
        "reconciliation_latency_ms",
        "manual_interventions",
    ];
    let report = properties(schemas, &schemas["MetricsReport"]);
    for field in counters.iter().chain(&[
        "unknown_now",
        "stuck_unknown",
        "awaiting_approval",
        "series",
    ]) {
        assert!(report.contains(*field), "MetricsReport lacks {field}");
    }
    let bucket = properties(schemas, &schemas["Bucket"]);
    for field in counters.iter().chain(&["bucket_start"]) {
        assert!(bucket.contains(*field), "Bucket lacks {field}");
    }
    let latency = properties(schemas, &schemas["Latency"]);
    assert_eq!(latency, ["max", "p50", "p95"].map(String::from).into());
    let scrape = &doc["paths"]["/metrics"]["get"];
    assert!(scrape["security"].is_null(), "scrapers need no credentials");
    assert!(scrape["responses"]["200"]["content"]["text/plain; version=0.0.4"].is_object());
}

#[tokio::test]
async fn the_document_states_the_rules_the_server_checks() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let doc = document(&app).await;
    let schemas = &doc["components"]["schemas"];
    for (name, max_length) in [("Namespace", 64), ("Username", 64), ("ToolName", 128)] {
        assert!(schemas[name]["pattern"].is_string(), "{name} has a pattern");
        assert_eq!(schemas[name]["maxLength"], max_length, "{name}");
    }
    let policy = &schemas["ToolPolicy"]["properties"];
    assert_eq!(policy["lease_seconds"]["minimum"], 1);
    assert_eq!(policy["lease_seconds"]["maximum"], 3600);
    assert!(policy["key_fields"]["items"]["pattern"].is_string());
    let executor = &schemas["ExecutorConfig"]["properties"];
    assert_eq!(executor["timeout_ms"]["maximum"], 300_000);
    assert_eq!(
        schemas["CreateUserRequest"]["properties"]["password"]["minLength"],
        8
    );
    for body in ["RejectBody", "ExpireBody", "ResolveBody"] {
        let required = schemas[body]["required"].as_array().unwrap();
        assert!(required.contains(&"reason".into()), "{body}: {required:?}");
    }
    let invoke = &doc["paths"]["/v1/tools/{name}/invoke"]["post"];
    let invoke_body = &invoke["requestBody"]["content"]["application/json"]["schema"]["$ref"];
    let invoke_body = invoke_body.as_str().unwrap().rsplit('/').next().unwrap();
    assert_eq!(
        schemas[invoke_body]["required"],
        serde_json::json!(["args"])
    );
}

#[tokio::test]
async fn every_operation_lists_the_answers_any_request_may_get() {
    let app = TestApp::spawn(Db::Sqlite).await;
    let doc = document(&app).await;
    let paths = doc["paths"].as_object().unwrap();
    for (path, operations) in paths {
        for (method, operation) in operations.as_object().unwrap() {
            let listed = &operation["responses"];
            let static_path = ["/healthz", "/v1/openapi.json"].contains(&path.as_str());
            if !static_path {
                assert!(listed["503"].is_object(), "{method} {path} lists 503");
                assert!(listed["500"].is_object(), "{method} {path} lists 500");
            }
            if operation.get("security").is_some() {
                for status in ["401", "403", "429"] {
                    assert!(listed[status].is_object(), "{method} {path} lists {status}");
                }
            }
            if operation.get("requestBody").is_some() {
                for status in ["400", "413", "415"] {
                    assert!(listed[status].is_object(), "{method} {path} lists {status}");
                }
            }
        }
    }
    let list = &paths["/v1/operations"]["get"]["parameters"];
    let cursor = list
        .as_array()
        .unwrap()
        .iter()
        .find(|parameter| parameter["name"] == "cursor")
        .unwrap();
    assert!(cursor["schema"]["pattern"]
        .as_str()
        .unwrap()
        .contains("c1_"));
}
