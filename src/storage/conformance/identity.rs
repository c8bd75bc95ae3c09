//! Users, sessions and API keys.

use app::domain::{ApiKeyInfo, Namespace, Role, Username};
use app::identity::{IdentityStore, NewApiKey, NewSession, NewUser, SecretHash};
use app::store_error::StoreError;
use chrono::{Duration, DurationRound, Utc};
use std::sync::Arc;
use uuid::Uuid;

use super::conformance;
use crate::storage::testing::{Backend, TestDatabase};
use crate::storage::Database;

conformance!(
    run;
    users_round_trip_and_names_are_unique,
    sessions_are_found_by_hash_with_their_user_ends_and_last_use,
    changing_a_password_ends_every_session_of_that_user,
    api_keys_are_found_by_hash_touched_listed_and_revoked,
    opening_twice_migrates_once,
);

async fn run<F, Fut>(backend: Backend, check: F)
where
    F: FnOnce(Arc<dyn IdentityStore>, TestDatabase) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let db = TestDatabase::create(backend).await;
    let database = Database::open(db.url())
        .await
        .expect("open the test database");
    check(database.identity_store(), db).await;
    database.close().await;
}

/// Timestamps as both databases keep them (microseconds).
fn now() -> chrono::DateTime<Utc> {
    Utc::now()
        .duration_trunc(Duration::microseconds(1))
        .unwrap()
}

fn new_user(name: &str, role: Role) -> NewUser {
    NewUser {
        id: Uuid::now_v7(),
        username: Username::try_from(name).unwrap(),
        role,
        password_hash: format!("hash-of-{name}"),
        created_at: now(),
        must_change_password: false,
    }
}

async fn users_round_trip_and_names_are_unique(store: Arc<dyn IdentityStore>, _db: TestDatabase) {
    assert_eq!(store.count_users().await.unwrap(), 0);
    let ada = new_user("ada", Role::Approver);
    store.insert_user(ada.clone()).await.unwrap();
    store
        .insert_user(new_user("bob", Role::Viewer))
        .await
        .unwrap();

    let again = store.insert_user(new_user("ada", Role::Admin)).await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");

    let found = store
        .user_by_username(&ada.username)
        .await
        .unwrap()
        .expect("ada exists");
    assert_eq!(found.info.id, ada.id);
    assert_eq!(found.info.role, Role::Approver);
    assert_eq!(found.info.created_at, ada.created_at);
    assert_eq!(found.password_hash, "hash-of-ada");
    let nobody = Username::try_from("nobody").unwrap();
    assert!(store.user_by_username(&nobody).await.unwrap().is_none());

    let names: Vec<String> = store
        .list_users()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.username.to_string())
        .collect();
    assert_eq!(names, ["ada", "bob"]);
    assert_eq!(store.count_users().await.unwrap(), 2);
}

async fn sessions_are_found_by_hash_with_their_user_ends_and_last_use(
    store: Arc<dyn IdentityStore>,
    _db: TestDatabase,
) {
    let ada = new_user("ada", Role::Operator);
    store.insert_user(ada.clone()).await.unwrap();
    let token = SecretHash::of("token-1");
    let created = now();
    store
        .insert_session(NewSession {
            token_hash: token.clone(),
            user_id: ada.id,
            created_at: created,
            expires_at: created + Duration::hours(1),
        })
        .await
        .unwrap();

    let session = store.session(&token).await.unwrap().expect("stored");
    assert_eq!(session.user.username, ada.username);
    assert_eq!(session.user.role, Role::Operator);
    assert_eq!(session.expires_at, created + Duration::hours(1));
    assert_eq!(session.last_used_at, created, "last used at sign-in");
    assert!(store
        .session(&SecretHash::of("other"))
        .await
        .unwrap()
        .is_none());

    let used = created + Duration::minutes(5);
    store.touch_session(&token, used).await.unwrap();
    let session = store.session(&token).await.unwrap().unwrap();
    assert_eq!(session.last_used_at, used);
    assert_eq!(
        session.expires_at,
        created + Duration::hours(1),
        "unchanged"
    );
    store
        .touch_session(&SecretHash::of("other"), used)
        .await
        .expect("touching no session is harmless");

    store.delete_session(&token).await.unwrap();
    assert!(store.session(&token).await.unwrap().is_none());
    store
        .delete_session(&token)
        .await
        .expect("deleting twice is harmless");
}

async fn changing_a_password_ends_every_session_of_that_user(
    store: Arc<dyn IdentityStore>,
    _db: TestDatabase,
) {
    let ada = new_user("ada", Role::Admin);
    let bob = new_user("bob", Role::Viewer);
    store.insert_user(ada.clone()).await.unwrap();
    store.insert_user(bob.clone()).await.unwrap();
    let at = now();
    for (token, user) in [("a1", &ada), ("a2", &ada), ("b1", &bob)] {
        let session = NewSession {
            token_hash: SecretHash::of(token),
            user_id: user.id,
            created_at: at,
            expires_at: at + Duration::hours(1),
        };
        store.insert_session(session).await.unwrap();
    }

    assert!(store
        .set_password(&ada.username, "new-hash".into())
        .await
        .unwrap());
    for token in ["a1", "a2"] {
        assert!(
            store
                .session(&SecretHash::of(token))
                .await
                .unwrap()
                .is_none(),
            "{token}"
        );
    }
    assert!(store
        .session(&SecretHash::of("b1"))
        .await
        .unwrap()
        .is_some());
    let stored = store
        .user_by_username(&ada.username)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.password_hash, "new-hash");

    let nobody = Username::try_from("nobody").unwrap();
    assert!(!store.set_password(&nobody, "x".into()).await.unwrap());
}

async fn api_keys_are_found_by_hash_touched_listed_and_revoked(
    store: Arc<dyn IdentityStore>,
    _db: TestDatabase,
) {
    let key = |name: &str, created_at| NewApiKey {
        info: ApiKeyInfo {
            id: Uuid::now_v7(),
            namespace: Namespace::try_from("support-bot").unwrap(),
            name: name.into(),
            prefix: format!("idem_{name}"),
            created_at,
            last_used_at: None,
            revoked_at: None,
        },
        key_hash: SecretHash::of(name),
    };
    let first = key("first", now() - Duration::seconds(10));
    let second = key("second", now());
    store.insert_api_key(first.clone()).await.unwrap();
    store.insert_api_key(second.clone()).await.unwrap();

    let found = store
        .api_key_by_hash(&SecretHash::of("first"))
        .await
        .unwrap()
        .expect("found");
    assert_eq!(found, first.info);
    assert!(store
        .api_key_by_hash(&SecretHash::of("third"))
        .await
        .unwrap()
        .is_none());

    let used_at = now();
    store.touch_api_key(first.info.id, used_at).await.unwrap();
    let listed = store.list_api_keys().await.unwrap();
    assert_eq!(
        listed.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(),
        ["second", "first"]
    );
    assert_eq!(listed[1].last_used_at, Some(used_at));

    let revoked_at = now();
    assert!(store
        .revoke_api_key(first.info.id, revoked_at)
        .await
        .unwrap());
    assert!(store
        .revoke_api_key(first.info.id, revoked_at + Duration::hours(1))
        .await
        .unwrap());
    let found = store
        .api_key_by_hash(&SecretHash::of("first"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        found.revoked_at,
        Some(revoked_at),
        "a second revocation keeps the first time"
    );
    assert!(!store
        .revoke_api_key(Uuid::now_v7(), revoked_at)
        .await
        .unwrap());

    let duplicate = NewApiKey {
        key_hash: SecretHash::of("second"),
        ..key("dup", now())
    };
    assert!(matches!(
        store.insert_api_key(duplicate).await,
        Err(StoreError::Conflict)
    ));
}

async fn opening_twice_migrates_once(store: Arc<dyn IdentityStore>, db: TestDatabase) {
    store
        .insert_user(new_user("ada", Role::Admin))
        .await
        .unwrap();
    let reopened = Database::open(db.url())
        .await
        .expect("a second open finds the schema current");
    assert_eq!(reopened.identity_store().count_users().await.unwrap(), 1);
    reopened.close().await;
}
