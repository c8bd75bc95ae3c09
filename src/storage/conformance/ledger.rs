//! Operations, events and tools.

use app::domain::{
    Fingerprint, IdempotencyKey, KeySource, Namespace, OperationStatus, ToolName, ToolPolicy,
};
use app::ledger::{
    Claim, ClaimRequest, EventKind, Fresh, LedgerStore, OperationFilter, Report, ReportRefused,
};
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;

use super::conformance;
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    a_claim_inserts_once_and_the_next_claim_finds_it,
    claims_racing_for_a_new_key_start_it_once,
    only_state_changes_are_committed_with_a_claim_and_quiet_events_follow,
    reports_apply_once_under_the_lease_and_stay_in_their_namespace,
    lists_filter_and_page_newest_first,
    lists_search_keys_literally,
    tools_round_trip_and_are_replaced,
);

async fn run<F, Fut>(backend: Backend, check: F)
where
    F: FnOnce(Arc<dyn LedgerStore>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url())
        .await
        .expect("open the test database");
    check(database.ledger_store()).await;
    database.close().await;
}

pub(crate) fn request(namespace: &str, key: &str, tool: &str) -> ClaimRequest {
    let tool = ToolName::try_from(tool).unwrap();
    let args = json!({ "order_id": key, "amount_cents": 500 });
    ClaimRequest {
        namespace: Namespace::try_from(namespace).unwrap(),
        key: IdempotencyKey::try_from(key).unwrap(),
        key_source: KeySource::Body,
        fingerprint: Fingerprint::compute(&tool, &args, &[]),
        tool,
        policy: ToolPolicy::default_for_unregistered(),
        args,
        run_id: Some("run-1".into()),
        step: Some(3),
        runner: app::ledger::Runner::Agent,
    }
}

pub(crate) fn fresh() -> Fresh {
    Fresh {
        operation_id: Uuid::now_v7(),
        lease_token: app::identity::random_token(),
    }
}

pub(crate) async fn start(
    store: &dyn LedgerStore,
    request: &ClaimRequest,
) -> (app::ledger::Operation, String) {
    match store
        .claim(request, "agent:test/k", fresh())
        .await
        .unwrap()
        .outcome
    {
        Claim::Started { operation, lease } => (operation, lease.token),
        other => panic!("expected a start, got {other:?}"),
    }
}

/// The stored digest of a lease some other claimer took over, as a test writes it behind the
/// store's back.
pub(crate) fn taken_over_digest() -> String {
    app::ledger::LeaseTokenHash::of("taken-over")
        .as_str()
        .to_owned()
}

/// A successful completion's report.
pub(crate) fn succeeded() -> app::ledger::Report {
    app::ledger::Report::Completed {
        succeeded: true,
        result: Some(json!({ "refund_id": "re_1" })),
        error: None,
        retryable: false,
        provider_ref: None,
    }
}

/// A successful completion of `before` by `actor`, decided now, not yet written.
pub(crate) fn late_completion(
    before: &app::ledger::Operation,
    token: &str,
    actor: &str,
) -> app::ledger::Decision<Result<app::ledger::Operation, app::ledger::ReportRefused>> {
    app::ledger::decide_report(
        before.clone(),
        token,
        &succeeded(),
        actor,
        chrono::Utc::now(),
    )
}

/// A completion of `before` decided by `agent:late`, overtaken before it is written: another
/// one, by `agent:first`, lands in between. The late decision, to be written (or not).
pub(crate) async fn overtaken_completion(
    store: &dyn LedgerStore,
    request: &ClaimRequest,
    before: &app::ledger::Operation,
    token: &str,
) -> app::ledger::Decision<Result<app::ledger::Operation, app::ledger::ReportRefused>> {
    let late = late_completion(before, token, "agent:late");
    let first = complete(store, request, before.id, token, "agent:first").await;
    assert!(first.is_ok(), "{first:?}");
    late
}

/// The answer to a successful completion of `id` by `actor`, reported through `store`.
pub(crate) async fn complete(
    store: &dyn LedgerStore,
    request: &ClaimRequest,
    id: Uuid,
    token: &str,
    actor: &str,
) -> Result<app::ledger::Operation, app::ledger::ReportRefused> {
    let decided = store
        .report(&request.namespace, id, token, &succeeded(), actor)
        .await
        .unwrap()
        .expect("found");
    decided.outcome
}

async fn a_claim_inserts_once_and_the_next_claim_finds_it(store: Arc<dyn LedgerStore>) {
    let order = request("billing", "order-1", "refund");
    let (started, _) = start(store.as_ref(), &order).await;
    assert_eq!(started.status, OperationStatus::Pending);
    assert_eq!(started.attempt, 1);

    let stored = store.operation(started.id).await.unwrap().expect("stored");
    assert_eq!(stored, started, "every field round-trips");

    let again = store.claim(&order, "agent:test/k", fresh()).await.unwrap();
    assert!(again.writes.is_empty());
    match again.outcome {
        Claim::InProgress { operation, .. } => assert_eq!(operation.id, started.id),
        other => panic!("expected in progress, got {other:?}"),
    }

    let elsewhere = request("support", "order-1", "refund");
    let (other, _) = start(store.as_ref(), &elsewhere).await;
    assert_ne!(
        other.id, started.id,
        "the same key in another namespace is another operation"
    );
}

/// Every claim reads the key before it writes; all of these read "no operation", so on
/// SQLite each then tries to insert without reading again (one trip to the writer), and
/// the index on a key's live operation must let exactly one of them in, with only its
/// events. On PostgreSQL a loser fails with `Conflict`, which the service retries; so does
/// this test.
async fn claims_racing_for_a_new_key_start_it_once(store: Arc<dyn LedgerStore>) {
    let order = request("billing", "order-race", "refund");
    let claims = (0..24).map(|_| {
        let (store, order) = (store.clone(), order.clone());
        tokio::spawn(async move {
            loop {
                match store.claim(&order, "agent:test/k", fresh()).await {
                    Err(app::store_error::StoreError::Conflict) => continue,
                    other => return other.unwrap().outcome,
                }
            }
        })
    });
    let mut started = Vec::new();
    let mut in_progress = Vec::new();
    for claim in claims.collect::<Vec<_>>() {
        match claim.await.unwrap() {
            Claim::Started { operation, .. } => started.push(operation.id),
            Claim::InProgress { operation, .. } => in_progress.push(operation.id),
            other => panic!("expected a start or in progress, got {other:?}"),
        }
    }
    assert_eq!(started.len(), 1, "exactly one claim starts the operation");
    assert_eq!(in_progress.len(), 23);
    assert!(
        in_progress.iter().all(|id| *id == started[0]),
        "the others are told about that one operation"
    );

    let filter = OperationFilter {
        namespace: Some(Namespace::try_from("billing").unwrap()),
        ..OperationFilter::default()
    };
    let listed = store.list(&filter, 50).await.unwrap();
    assert_eq!(
        listed.iter().map(|op| op.id).collect::<Vec<_>>(),
        started,
        "one operation is stored"
    );
    let events = store.events(started[0]).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::Claimed],
        "the losers' inserts left no event behind"
    );
}

async fn only_state_changes_are_committed_with_a_claim_and_quiet_events_follow(
    store: Arc<dyn LedgerStore>,
) {
    let order = request("billing", "order-1", "refund");
    let (started, _) = start(store.as_ref(), &order).await;
    let duplicate = store.claim(&order, "agent:test/k", fresh()).await.unwrap();

    let kinds =
        |events: Vec<app::ledger::Event>| events.into_iter().map(|e| e.kind).collect::<Vec<_>>();
    assert_eq!(
        kinds(store.events(started.id).await.unwrap()),
        [EventKind::Claimed]
    );
    store.record_quiet_events(duplicate.events.clone());
    let events = store.events(started.id).await.unwrap();
    assert_eq!(
        kinds(events.clone()),
        [EventKind::Claimed, EventKind::InFlightRejected]
    );
    assert_eq!(events[0].actor, "agent:test/k");
    assert_eq!(events[0].detail["attempt"], 1);
}

async fn reports_apply_once_under_the_lease_and_stay_in_their_namespace(
    store: Arc<dyn LedgerStore>,
) {
    let order = request("billing", "order-1", "refund");
    let (started, token) = start(store.as_ref(), &order).await;
    let billing = order.namespace.clone();
    let success = Report::Completed {
        succeeded: true,
        result: Some(json!({ "refund": "re_1" })),
        error: None,
        retryable: false,
        provider_ref: Some("re_1".into()),
    };

    let support = Namespace::try_from("support").unwrap();
    let foreign = store
        .report(&support, started.id, &token, &success, "agent:support/k")
        .await
        .unwrap();
    assert!(foreign.is_none(), "another namespace cannot report");
    let wrong = store
        .report(&billing, started.id, "wrong", &success, "a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(wrong.outcome, Err(ReportRefused::LeaseLost));

    let done = store
        .report(&billing, started.id, &token, &success, "a")
        .await
        .unwrap()
        .unwrap();
    let done = done.outcome.expect("completed");
    assert_eq!(done.status, OperationStatus::Succeeded);
    assert_eq!(store.operation(started.id).await.unwrap().unwrap(), done);

    let repeated = store
        .report(&billing, started.id, &token, &success, "a")
        .await
        .unwrap()
        .unwrap();
    assert!(repeated.writes.is_empty());
    assert_eq!(repeated.outcome, Ok(done));
    let unknown = Report::Unknown { error: None };
    let late = store
        .report(&billing, started.id, &token, &unknown, "a")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        late.outcome,
        Err(ReportRefused::AlreadyFinal {
            status: OperationStatus::Succeeded
        })
    );
}

async fn lists_filter_and_page_newest_first(store: Arc<dyn LedgerStore>) {
    let mut ids = Vec::new();
    for (n, tool) in ["refund", "email", "refund"].iter().enumerate() {
        let (op, _) = start(store.as_ref(), &request("billing", &format!("k{n}"), tool)).await;
        ids.push(op.id);
    }
    start(store.as_ref(), &request("support", "k0", "refund")).await;
    let listed = |filter: OperationFilter, limit| {
        let store = store.clone();
        async move {
            store
                .list(&filter, limit)
                .await
                .unwrap()
                .into_iter()
                .map(|op| op.id)
                .collect::<Vec<_>>()
        }
    };
    let billing = Some(Namespace::try_from("billing").unwrap());

    let all = listed(
        OperationFilter {
            namespace: billing.clone(),
            ..Default::default()
        },
        10,
    )
    .await;
    assert_eq!(all, [ids[2], ids[1], ids[0]]);
    let refunds = OperationFilter {
        namespace: billing.clone(),
        tool: Some(ToolName::try_from("refund").unwrap()),
        ..Default::default()
    };
    assert_eq!(listed(refunds, 10).await, [ids[2], ids[0]]);
    let older = OperationFilter {
        namespace: billing.clone(),
        before: Some(ids[2]),
        ..Default::default()
    };
    assert_eq!(listed(older, 1).await, [ids[1]]);
    let done = OperationFilter {
        status: Some(OperationStatus::Succeeded),
        ..Default::default()
    };
    assert!(listed(done, 10).await.is_empty());
    assert_eq!(listed(OperationFilter::default(), 10).await.len(), 4);

    // Queues read oldest first, paging forwards.
    let oldest = OperationFilter {
        namespace: billing.clone(),
        oldest_first: true,
        ..Default::default()
    };
    assert_eq!(listed(oldest.clone(), 10).await, [ids[0], ids[1], ids[2]]);
    let next = OperationFilter {
        before: Some(ids[0]),
        ..oldest
    };
    assert_eq!(listed(next, 1).await, [ids[1]]);
}

async fn lists_search_keys_literally(store: Arc<dyn LedgerStore>) {
    for key in [
        "refund:order-1",
        "refund:order-2",
        "email:order-1",
        "100%_off",
    ] {
        start(store.as_ref(), &request("billing", key, "refund")).await;
    }
    let keys_containing = |text: &str| {
        let store = store.clone();
        let filter = OperationFilter {
            key_contains: Some(text.to_owned()),
            ..Default::default()
        };
        async move {
            let mut keys: Vec<String> = store
                .list(&filter, 10)
                .await
                .unwrap()
                .into_iter()
                .map(|op| op.key.to_string())
                .collect();
            keys.sort();
            keys
        }
    };
    assert_eq!(
        keys_containing("order-1").await,
        ["email:order-1", "refund:order-1"]
    );
    assert_eq!(
        keys_containing("refund:").await,
        ["refund:order-1", "refund:order-2"]
    );
    // Wildcards in the search text are literal characters, not patterns.
    assert_eq!(keys_containing("%_").await, ["100%_off"]);
    assert!(keys_containing("_").await.len() == 1);
    assert!(keys_containing("nothing like it").await.is_empty());
}

async fn tools_round_trip_and_are_replaced(store: Arc<dyn LedgerStore>) {
    let refund = ToolName::try_from("refund").unwrap();
    assert!(store.tool(&refund).await.unwrap().is_none());
    let mut policy = ToolPolicy::default_for_unregistered();
    policy.key_fields = vec!["order_id".into()];
    let first = store.put_tool(&refund, &policy).await.unwrap();
    assert_eq!(store.tool(&refund).await.unwrap(), Some(policy.clone()));

    policy.lease_seconds = 5;
    let second = store.put_tool(&refund, &policy).await.unwrap();
    assert_eq!(
        second.created_at, first.created_at,
        "a replacement keeps the creation time"
    );
    assert!(second.updated_at >= first.updated_at);
    let tools = store.tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].policy.lease_seconds, 5);
}
