//! Users, sessions and API keys: the `IdentityStore` implementation, written once for both
//! databases (the statements are the same text; sqlx binds `$N` on SQLite too).

/// Implements `IdentityStore` for a backend store whose pools are named `$reader` (reads)
/// and `$writer` (changes).
macro_rules! impl_identity_store {
    (
        store: $store:ident,
        reader: $reader:ident,
        writer: $writer:ident,
        lock_admins: $lock_admins:literal
    ) => {
        #[async_trait::async_trait]
        impl IdentityStore for $store {
            async fn count_users(&self) -> Result<u64, StoreError> {
                let (count,): (i64,) = sqlx::query_as("select count(*) from users")
                    .fetch_one(&self.$reader)
                    .await
                    .map_err(store_error)?;
                Ok(count.unsigned_abs())
            }

            async fn insert_user(&self, user: NewUser) -> Result<(), StoreError> {
                sqlx::query(
                    r#"insert into users
                           (id, username, role, password_hash, created_at, must_change_password)
                       values ($1, $2, $3, $4, $5, $6)"#,
                )
                .bind(user.id)
                .bind(user.username.as_str())
                .bind(user.role.as_str())
                .bind(user.password_hash)
                .bind(user.created_at)
                .bind(user.must_change_password)
                .execute(&self.$writer)
                .await
                .map_err(store_error)?;
                Ok(())
            }

            async fn user_by_username(
                &self,
                username: &Username,
            ) -> Result<Option<StoredUser>, StoreError> {
                let sql = format!("select {USER_COLUMNS} from users where username = $1");
                let row: Option<UserRow> = sqlx::query_as(&sql)
                    .bind(username.as_str())
                    .fetch_optional(&self.$reader)
                    .await
                    .map_err(store_error)?;
                row.map(StoredUser::try_from).transpose()
            }

            async fn list_users(&self) -> Result<Vec<UserInfo>, StoreError> {
                let sql = format!("select {USER_COLUMNS} from users order by username");
                let rows: Vec<UserRow> = sqlx::query_as(&sql)
                    .fetch_all(&self.$reader)
                    .await
                    .map_err(store_error)?;
                let users: Vec<StoredUser> = convert_all(rows)?;
                Ok(users.into_iter().map(|user| user.info).collect())
            }

            async fn set_password(
                &self,
                username: &Username,
                password_hash: String,
            ) -> Result<bool, StoreError> {
                let mut tx = self.$writer.begin().await.map_err(store_error)?;
                let updated = sqlx::query(
                    "update users set password_hash = $1, must_change_password = false \
                     where username = $2",
                )
                    .bind(password_hash)
                    .bind(username.as_str())
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?
                    .rows_affected();
                sqlx::query(
                    "delete from sessions where user_id = (select id from users where username = $1)",
                )
                .bind(username.as_str())
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(updated == 1)
            }

            async fn set_own_password(
                &self,
                id: Uuid,
                password_hash: String,
                keep: &SecretHash,
            ) -> Result<(), StoreError> {
                let mut tx = self.$writer.begin().await.map_err(store_error)?;
                sqlx::query(
                    "update users set password_hash = $1, must_change_password = false where id = $2",
                )
                .bind(password_hash)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                sqlx::query("delete from sessions where user_id = $1 and token_hash <> $2")
                    .bind(id)
                    .bind(&keep.0[..])
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                tx.commit().await.map_err(store_error)?;
                Ok(())
            }

            async fn change_account(
                &self,
                id: Uuid,
                change: &AccountChange,
                now: DateTime<Utc>,
            ) -> Result<AccountChanged, StoreError> {
                let mut tx = self.$writer.begin().await.map_err(store_error)?;
                sqlx::query($lock_admins)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                let sql = format!("select {USER_COLUMNS} from users where id = $1");
                let row: Option<UserRow> = sqlx::query_as(&sql)
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_error)?;
                let Some(user) = row.map(StoredUser::try_from).transpose()? else {
                    return Ok(AccountChanged::NoSuchUser);
                };
                if change.removes_an_admin(&user.info) {
                    let (admins,): (i64,) = sqlx::query_as(
                        "select count(*) from users where role = 'admin' and disabled_at is null",
                    )
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(store_error)?;
                    if admins <= 1 {
                        return Ok(AccountChanged::LastAdmin);
                    }
                }
                if change.ends_sessions() {
                    sqlx::query("delete from sessions where user_id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                }
                let before = user.info;
                let mut info = before.clone();
                match change {
                    AccountChange::Delete => {
                        sqlx::query("delete from users where id = $1")
                            .bind(id)
                            .execute(&mut *tx)
                            .await
                            .map_err(store_error)?;
                    }
                    AccountChange::Update { disabled, role } => {
                        if let Some(disabled) = *disabled {
                            info.disabled = disabled;
                        }
                        if let Some(role) = *role {
                            info.role = role;
                        }
                        // A disabled person keeps the time they were first disabled.
                        sqlx::query(
                            r#"update users
                               set role = $2,
                                   disabled_at = case when $3 then coalesce(disabled_at, $4) end
                               where id = $1"#,
                        )
                        .bind(id)
                        .bind(info.role.as_str())
                        .bind(info.disabled)
                        .bind(now)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    }
                }
                tx.commit().await.map_err(store_error)?;
                Ok(AccountChanged::Done {
                    before,
                    after: info,
                })
            }

            async fn insert_session(&self, session: NewSession) -> Result<(), StoreError> {
                sqlx::query(
                    r#"insert into sessions (token_hash, user_id, created_at, expires_at, last_used_at)
                       values ($1, $2, $3, $4, $3)"#,
                )
                .bind(&session.token_hash.0[..])
                .bind(session.user_id)
                .bind(session.created_at)
                .bind(session.expires_at)
                .execute(&self.$writer)
                .await
                .map_err(store_error)?;
                Ok(())
            }

            async fn session(
                &self,
                token_hash: &SecretHash,
            ) -> Result<Option<StoredSession>, StoreError> {
                let row: Option<SessionUserRow> = sqlx::query_as(
                    r#"select u.id, u.username, u.role, u.password_hash, u.created_at,
                              u.disabled_at, u.must_change_password, s.expires_at, s.last_used_at
                       from sessions s join users u on u.id = s.user_id
                       where s.token_hash = $1"#,
                )
                .bind(&token_hash.0[..])
                .fetch_optional(&self.$reader)
                .await
                .map_err(store_error)?;
                row.map(StoredSession::try_from).transpose()
            }

            async fn touch_session(
                &self,
                token_hash: &SecretHash,
                now: DateTime<Utc>,
            ) -> Result<(), StoreError> {
                sqlx::query("update sessions set last_used_at = $1 where token_hash = $2")
                    .bind(now)
                    .bind(&token_hash.0[..])
                    .execute(&self.$writer)
                    .await
                    .map_err(store_error)?;
                Ok(())
            }

            async fn delete_session(&self, token_hash: &SecretHash) -> Result<(), StoreError> {
                sqlx::query("delete from sessions where token_hash = $1")
                    .bind(&token_hash.0[..])
                    .execute(&self.$writer)
                    .await
                    .map_err(store_error)?;
                Ok(())
            }

            async fn insert_api_key(&self, key: NewApiKey) -> Result<(), StoreError> {
                sqlx::query(
                    r#"insert into api_keys (id, key_hash, namespace, name, prefix, created_at)
                       values ($1, $2, $3, $4, $5, $6)"#,
                )
                .bind(key.info.id)
                .bind(&key.key_hash.0[..])
                .bind(key.info.namespace.as_str())
                .bind(&key.info.name)
                .bind(&key.info.prefix)
                .bind(key.info.created_at)
                .execute(&self.$writer)
                .await
                .map_err(store_error)?;
                Ok(())
            }

            async fn api_key_by_hash(
                &self,
                key_hash: &SecretHash,
            ) -> Result<Option<ApiKeyInfo>, StoreError> {
                let sql = format!("select {API_KEY_COLUMNS} from api_keys where key_hash = $1");
                let row: Option<ApiKeyRow> = sqlx::query_as(&sql)
                    .bind(&key_hash.0[..])
                    .fetch_optional(&self.$reader)
                    .await
                    .map_err(store_error)?;
                row.map(ApiKeyInfo::try_from).transpose()
            }

            async fn touch_api_key(&self, id: Uuid, now: DateTime<Utc>) -> Result<(), StoreError> {
                sqlx::query("update api_keys set last_used_at = $1 where id = $2")
                    .bind(now)
                    .bind(id)
                    .execute(&self.$writer)
                    .await
                    .map_err(store_error)?;
                Ok(())
            }

            async fn list_api_keys(&self) -> Result<Vec<ApiKeyInfo>, StoreError> {
                let sql =
                    format!("select {API_KEY_COLUMNS} from api_keys order by created_at desc, id desc");
                let rows: Vec<ApiKeyRow> = sqlx::query_as(&sql)
                    .fetch_all(&self.$reader)
                    .await
                    .map_err(store_error)?;
                convert_all(rows)
            }

            async fn revoke_api_key(&self, id: Uuid, now: DateTime<Utc>) -> Result<bool, StoreError> {
                sqlx::query("update api_keys set revoked_at = $1 where id = $2 and revoked_at is null")
                    .bind(now)
                    .bind(id)
                    .execute(&self.$writer)
                    .await
                    .map_err(store_error)?;
                let (exists,): (bool,) =
                    sqlx::query_as("select exists(select 1 from api_keys where id = $1)")
                        .bind(id)
                        .fetch_one(&self.$writer)
                        .await
                        .map_err(store_error)?;
                Ok(exists)
            }
        }
    };
}

pub(super) use impl_identity_store;
