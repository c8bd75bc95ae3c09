//! Users, sessions and API keys: the `IdentityStore` implementation, written once for both
//! databases (the statements are the same text; sqlx binds `$N` on SQLite too).

use app::domain::{ApiKeyInfo, UserInfo, Username};
use app::identity::{
    AccountChange, AccountChanged, IdentityStore, NewApiKey, NewSession, NewUser, SecretHash,
    StoredSession, StoredUser,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::{Bind, Dialect, Fetch, Run};
use super::rows::{convert_all, ApiKeyRow, SessionUserRow, UserRow, API_KEY_COLUMNS, USER_COLUMNS};
use super::store_error;

#[async_trait::async_trait]
impl<B: SqlBackend> IdentityStore for SqlStore<B> {
    async fn count_users(&self) -> Result<u64, StoreError> {
        let (count,): (i64,) = B::Db::query_as("select count(*) from users")
            .row(&mut *self.0.read_connection().await?)
            .await?;
        Ok(count.unsigned_abs())
    }

    async fn insert_user(&self, user: NewUser) -> Result<(), StoreError> {
        sqlx::query::<B::Db>(
            r#"insert into users
                   (id, username, role, password_hash, created_at, must_change_password)
               values ($1, $2, $3, $4, $5, $6)"#,
        )
        .param(user.id)
        .param(user.username.as_str())
        .param(user.role.as_str())
        .param(user.password_hash)
        .param(user.created_at)
        .param(user.must_change_password)
        .run(&mut *self.0.write_connection().await?)
        .await?;
        Ok(())
    }

    async fn user_by_username(
        &self,
        username: &Username,
    ) -> Result<Option<StoredUser>, StoreError> {
        let sql = format!("select {USER_COLUMNS} from users where username = $1");
        let row: Option<UserRow> = B::Db::query_as(&sql)
            .param(username.as_str())
            .maybe_row(&mut *self.0.read_connection().await?)
            .await?;
        row.map(StoredUser::try_from).transpose()
    }

    async fn list_users(&self) -> Result<Vec<UserInfo>, StoreError> {
        let sql = format!("select {USER_COLUMNS} from users order by username");
        let rows: Vec<UserRow> = B::Db::query_as(&sql)
            .rows(&mut *self.0.read_connection().await?)
            .await?;
        let users: Vec<StoredUser> = convert_all(rows)?;
        Ok(users.into_iter().map(|user| user.info).collect())
    }

    async fn set_password(
        &self,
        username: &Username,
        password_hash: String,
    ) -> Result<bool, StoreError> {
        let mut tx = self.0.writer().begin().await.map_err(store_error)?;
        let updated = sqlx::query::<B::Db>(
            "update users set password_hash = $1, must_change_password = false \
             where username = $2",
        )
        .param(password_hash)
        .param(username.as_str())
        .run(&mut *tx)
        .await?;
        sqlx::query::<B::Db>(
            "delete from sessions where user_id = (select id from users where username = $1)",
        )
        .param(username.as_str())
        .run(&mut *tx)
        .await?;
        tx.commit().await.map_err(store_error)?;
        Ok(updated == 1)
    }

    async fn set_own_password(
        &self,
        id: Uuid,
        password_hash: String,
        keep: &SecretHash,
    ) -> Result<(), StoreError> {
        let mut tx = self.0.writer().begin().await.map_err(store_error)?;
        sqlx::query::<B::Db>(
            "update users set password_hash = $1, must_change_password = false where id = $2",
        )
        .param(password_hash)
        .param(id)
        .run(&mut *tx)
        .await?;
        sqlx::query::<B::Db>("delete from sessions where user_id = $1 and token_hash <> $2")
            .param(id)
            .param(&keep.0[..])
            .run(&mut *tx)
            .await?;
        tx.commit().await.map_err(store_error)?;
        Ok(())
    }

    async fn change_account(
        &self,
        id: Uuid,
        change: &AccountChange,
        now: DateTime<Utc>,
    ) -> Result<AccountChanged, StoreError> {
        let mut tx = self.0.writer().begin().await.map_err(store_error)?;
        sqlx::query::<B::Db>(B::Db::LOCK_ADMINS)
            .run(&mut *tx)
            .await?;
        let sql = format!("select {USER_COLUMNS} from users where id = $1");
        let row: Option<UserRow> = B::Db::query_as(&sql).param(id).maybe_row(&mut *tx).await?;
        let Some(user) = row.map(StoredUser::try_from).transpose()? else {
            return Ok(AccountChanged::NoSuchUser);
        };
        if change.removes_an_admin(&user.info) {
            let (admins,): (i64,) = B::Db::query_as(
                "select count(*) from users where role = 'admin' and disabled_at is null",
            )
            .row(&mut *tx)
            .await?;
            if admins <= 1 {
                return Ok(AccountChanged::LastAdmin);
            }
        }
        if change.ends_sessions() {
            sqlx::query::<B::Db>("delete from sessions where user_id = $1")
                .param(id)
                .run(&mut *tx)
                .await?;
        }
        let before = user.info;
        let mut info = before.clone();
        match change {
            AccountChange::Delete => {
                sqlx::query::<B::Db>("delete from users where id = $1")
                    .param(id)
                    .run(&mut *tx)
                    .await?;
            }
            AccountChange::Update { disabled, role } => {
                if let Some(disabled) = *disabled {
                    info.disabled = disabled;
                }
                if let Some(role) = *role {
                    info.role = role;
                }
                // A disabled person keeps the time they were first disabled.
                sqlx::query::<B::Db>(
                    r#"update users
                       set role = $2,
                           disabled_at = case when $3 then coalesce(disabled_at, $4) end
                       where id = $1"#,
                )
                .param(id)
                .param(info.role.as_str())
                .param(info.disabled)
                .param(now)
                .run(&mut *tx)
                .await?;
            }
        }
        tx.commit().await.map_err(store_error)?;
        Ok(AccountChanged::Done {
            before,
            after: info,
        })
    }

    async fn insert_session(&self, session: NewSession) -> Result<(), StoreError> {
        sqlx::query::<B::Db>(
            r#"insert into sessions (token_hash, user_id, created_at, expires_at, last_used_at)
               values ($1, $2, $3, $4, $3)"#,
        )
        .param(&session.token_hash.0[..])
        .param(session.user_id)
        .param(session.created_at)
        .param(session.expires_at)
        .run(&mut *self.0.write_connection().await?)
        .await?;
        Ok(())
    }

    async fn session(&self, token_hash: &SecretHash) -> Result<Option<StoredSession>, StoreError> {
        let row: Option<SessionUserRow> = B::Db::query_as(
            r#"select u.id, u.username, u.role, u.password_hash, u.created_at,
                      u.disabled_at, u.must_change_password, s.expires_at, s.last_used_at
               from sessions s join users u on u.id = s.user_id
               where s.token_hash = $1"#,
        )
        .param(&token_hash.0[..])
        .maybe_row(&mut *self.0.read_connection().await?)
        .await?;
        row.map(StoredSession::try_from).transpose()
    }

    async fn touch_session(
        &self,
        token_hash: &SecretHash,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query::<B::Db>("update sessions set last_used_at = $1 where token_hash = $2")
            .param(now)
            .param(&token_hash.0[..])
            .run(&mut *self.0.write_connection().await?)
            .await?;
        Ok(())
    }

    async fn delete_session(&self, token_hash: &SecretHash) -> Result<(), StoreError> {
        sqlx::query::<B::Db>("delete from sessions where token_hash = $1")
            .param(&token_hash.0[..])
            .run(&mut *self.0.write_connection().await?)
            .await?;
        Ok(())
    }

    async fn insert_api_key(&self, key: NewApiKey) -> Result<(), StoreError> {
        sqlx::query::<B::Db>(
            r#"insert into api_keys (id, key_hash, namespace, name, prefix, created_at)
               values ($1, $2, $3, $4, $5, $6)"#,
        )
        .param(key.info.id)
        .param(&key.key_hash.0[..])
        .param(key.info.namespace.as_str())
        .param(&key.info.name)
        .param(&key.info.prefix)
        .param(key.info.created_at)
        .run(&mut *self.0.write_connection().await?)
        .await?;
        Ok(())
    }

    async fn api_key_by_hash(
        &self,
        key_hash: &SecretHash,
    ) -> Result<Option<ApiKeyInfo>, StoreError> {
        let sql = format!("select {API_KEY_COLUMNS} from api_keys where key_hash = $1");
        let row: Option<ApiKeyRow> = B::Db::query_as(&sql)
            .param(&key_hash.0[..])
            .maybe_row(&mut *self.0.read_connection().await?)
            .await?;
        row.map(ApiKeyInfo::try_from).transpose()
    }

    async fn touch_api_key(&self, id: Uuid, now: DateTime<Utc>) -> Result<(), StoreError> {
        sqlx::query::<B::Db>("update api_keys set last_used_at = $1 where id = $2")
            .param(now)
            .param(id)
            .run(&mut *self.0.write_connection().await?)
            .await?;
        Ok(())
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKeyInfo>, StoreError> {
        let sql =
            format!("select {API_KEY_COLUMNS} from api_keys order by created_at desc, id desc");
        let rows: Vec<ApiKeyRow> = B::Db::query_as(&sql)
            .rows(&mut *self.0.read_connection().await?)
            .await?;
        convert_all(rows)
    }

    async fn revoke_api_key(&self, id: Uuid, now: DateTime<Utc>) -> Result<bool, StoreError> {
        sqlx::query::<B::Db>(
            "update api_keys set revoked_at = $1 where id = $2 and revoked_at is null",
        )
        .param(now)
        .param(id)
        .run(&mut *self.0.write_connection().await?)
        .await?;
        let (exists,): (bool,) =
            B::Db::query_as("select exists(select 1 from api_keys where id = $1)")
                .param(id)
                .row(&mut *self.0.write_connection().await?)
                .await?;
        Ok(exists)
    }
}
