//! The count of requests waiting for a person: only live `awaiting_approval` operations, in
//! every namespace, read from the small partial index rather than from the table.

use app::domain::ApprovalPolicy;
use app::ledger::{Claim, LedgerStore, Verdict};

use super::conformance;
use super::ledger::{fresh, request, start};
use super::metrics::run;
use super::sqlite_plan;
use crate::storage::ledger_sql::count_awaiting_approval;
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    the_waiting_count_counts_requests_until_a_person_decides,
);

/// Claims a new key of a tool that always asks a person first; returns the operation's id.
async fn ask(store: &dyn LedgerStore, namespace: &str, key: &str) -> uuid::Uuid {
    let mut request = request(namespace, key, "refund");
    request.policy.approval = ApprovalPolicy::Always;
    match store
        .claim(&request, "agent:test/k", fresh())
        .await
        .unwrap()
        .outcome
    {
        Claim::AwaitingApproval { operation } => operation.id,
        other => panic!("expected a request for approval, got {other:?}"),
    }
}

async fn the_waiting_count_counts_requests_until_a_person_decides(
    backend: Backend,
    db: TestDatabase,
    database: Database,
) {
    let store = database.ledger_store();
    assert_eq!(store.count_awaiting_approval().await.unwrap(), 0);

    let first = ask(store.as_ref(), "billing", "k1").await;
    let second = ask(store.as_ref(), "billing", "k2").await;
    ask(store.as_ref(), "support", "k1").await;
    // Operations that need nobody are not counted.
    start(store.as_ref(), &request("billing", "k3", "refund")).await;
    assert_eq!(store.count_awaiting_approval().await.unwrap(), 3);

    let approve = Verdict::Approve { reason: None };
    let reject = Verdict::Reject {
        reason: "not this one".into(),
    };
    store.decide(first, &approve, "alice").await.unwrap();
    store.decide(second, &reject, "alice").await.unwrap();
    assert_eq!(store.count_awaiting_approval().await.unwrap(), 1);

    if backend == Backend::Sqlite {
        let plan = sqlite_plan(&db, &count_awaiting_approval::<sqlx::Sqlite>()).await;
        assert!(
            plan.contains("operations_waiting"),
            "the count reads the partial index: {plan}"
        );
    }
}
