//! The ledger's SQL and its `LedgerStore` implementation, written once for both databases.
//!
//! The statements are the same text on SQLite and PostgreSQL (sqlx binds `$N` on both); what
//! differs is passed in: the connection type, the row lock (`for update` on PostgreSQL; on
//! SQLite the writer's `BEGIN IMMEDIATE` already excludes everyone), and two functions each
//! backend module defines beside the macro call — `begin_write` (the transaction a change
//! runs in) and `now` (whose clock decides leases and expiry).

/// Implements `LedgerStore` for a backend store. Expects in scope, beside the imports the
/// body names:
/// - on the store: `write(work)`, which runs `work` in a write transaction and answers after
///   its commit (on SQLite possibly together with other changes: group commit), publishing
///   the changes `work` returns; and `quiet_events` (a `QuietEvents`);
/// - `async fn now(&mut $conn) -> Result<DateTime<Utc>, StoreError>` (the clock of leases);
/// - on the store, `finals()`: the final outcomes it keeps in memory, if it may (see
///   `FinalOutcomes`; `FinalOutcomes` itself must be in scope);
/// - `async fn live_now(&mut $conn, &Namespace, &str, lock: bool)` and
///   `async fn locked_now(&mut $conn, Uuid)`: an operation (the live one of a key; one by id,
///   locked) with the time it was read at, in one round trip where the database tells time.
///
/// Changes are published by the backend: on SQLite after the commit, from what `write`'s work
/// returns; on PostgreSQL by a trigger inside the transaction (migration `announce_trigger`).
macro_rules! impl_ledger_store {
    (store: $store:ident, db: $db:ty, conn: $conn:ty, lock: $lock:literal, skip_locked: $skip_locked:literal, reader: $reader:ident) => {
        async fn operation_by_id(
            executor: &mut $conn,
            id: Uuid,
            lock: bool,
        ) -> Result<Option<Operation>, StoreError> {
            let lock = if lock { $lock } else { "" };
            let sql = format!("select {OPERATION_COLUMNS} from operations where id = $1{lock}");
            let row: Option<OperationRow> = sqlx::query_as(&sql)
                .bind(id)
                .fetch_optional(executor)
                .await
                .map_err(store_error)?;
            row.map(Operation::try_from).transpose()
        }

        async fn apply(tx: &mut $conn, writes: &[Write]) -> Result<(), StoreError> {
            for write in writes {
                match write {
                    Write::Insert(operation) => insert(tx, operation).await?,
                    Write::Update {
                        after,
                        expected_status,
                    } => update(tx, after, &to_text(expected_status)).await?,
                    Write::Retire { id, at } => {
                        sqlx::query(
                            "update operations set retired_at = $1 where id = $2 and retired_at is null",
                        )
                        .bind(at)
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_error)?;
                    }
                }
            }
            Ok(())
        }

        async fn insert(tx: &mut $conn, operation: &Operation) -> Result<(), StoreError> {
            let v = OperationValues::from(operation);
            let sql = format!("insert into operations ({OPERATION_COLUMNS}) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)");
            sqlx::query(&sql)
                .bind(v.id)
                .bind(v.namespace)
                .bind(v.key)
                .bind(v.key_source)
                .bind(v.tool)
                .bind(v.effect)
                .bind(v.fingerprint)
                .bind(v.args)
                .bind(v.run_id)
                .bind(v.step)
                .bind(v.status)
                .bind(v.attempt)
                .bind(v.result)
                .bind(v.error)
                .bind(v.retryable)
                .bind(v.provider_ref)
                .bind(v.lease_token)
                .bind(v.lease_expires_at)
                .bind(v.created_at)
                .bind(v.updated_at)
                .bind(v.completed_at)
                .bind(v.expires_at)
                .bind(v.approval)
                .bind(v.approval_expires_at)
                .bind(v.runner)
                .bind(v.unknown_since)
                .bind(v.reconcile_attempts)
                .bind(v.next_reconcile_at)
                .execute(tx)
                .await
                .map_err(store_error)?;
            Ok(())
        }

        /// The guarded transition: zero rows means the operation moved under us, which the
        /// transaction's lock rules out; it is reported rather than ignored.
        async fn update(
            tx: &mut $conn,
            after: &Operation,
            expected_status: &str,
        ) -> Result<(), StoreError> {
            let v = OperationValues::from(after);
            let changed = sqlx::query(
                r#"update operations set status = $1, attempt = $2, result = $3, error = $4, retryable = $5, provider_ref = $6,
                       lease_token = $7, lease_expires_at = $8, updated_at = $9, completed_at = $10, expires_at = $11, approval = $12,
                       approval_expires_at = $13, unknown_since = $14, reconcile_attempts = $15, next_reconcile_at = $16
                   where id = $17 and status = $18"#,
            )
            .bind(v.status)
            .bind(v.attempt)
            .bind(v.result)
            .bind(v.error)
            .bind(v.retryable)
            .bind(v.provider_ref)
            .bind(v.lease_token)
            .bind(v.lease_expires_at)
            .bind(v.updated_at)
            .bind(v.completed_at)
            .bind(v.expires_at)
            .bind(v.approval)
            .bind(v.approval_expires_at)
            .bind(v.unknown_since)
            .bind(v.reconcile_attempts)
            .bind(v.next_reconcile_at)
            .bind(v.id)
            .bind(expected_status)
            .execute(tx)
            .await
            .map_err(store_error)?
            .rows_affected();
            if changed == 1 {
                Ok(())
            } else {
                Err(StoreError::Stale)
            }
        }

        /// Inserts events, many rows per statement (a statement costs far more than a row).
        async fn insert_events(tx: &mut $conn, events: &[Event]) -> Result<(), StoreError> {
            // Five parameters a row, well under either database's limit per statement.
            for chunk in events.chunks(200) {
                let mut insert = sqlx::QueryBuilder::<$db>::new(
                    "insert into operation_events (operation_id, at, kind, actor, detail) ",
                );
                insert.push_values(chunk, |mut row, event| {
                    row.push_bind(event.operation_id)
                        .push_bind(event.at)
                        .push_bind(event.kind.as_str())
                        .push_bind(&event.actor)
                        .push_bind(Json(&event.detail));
                });
                insert.build().execute(&mut *tx).await.map_err(store_error)?;
            }
            Ok(())
        }

        /// Stages the decision's writes with its state-changing events in the open
        /// transaction, and returns the changes to publish once it commits. A decision
        /// without writes (a refused report) stages nothing.
        async fn stage<T>(
            tx: &mut $conn,
            decision: &Decision<T>,
        ) -> Result<Vec<OperationChange>, StoreError> {
            if decision.writes.is_empty() {
                return Ok(Vec::new());
            }
            apply(tx, &decision.writes).await?;
            let state_events: Vec<Event> = decision
                .events
                .iter()
                .filter(|e| e.kind.changes_state())
                .cloned()
                .collect();
            insert_events(tx, &state_events).await?;
            Ok(OperationChange::of_writes(&decision.writes))
        }

        /// Decides on one operation under its lock, at the clock's time, and stages the
        /// decision; `None` when there is no such operation or `decide` declines it (it is
        /// not the caller's).
        async fn decide_on<T>(
            tx: &mut $conn,
            id: Uuid,
            decide: impl FnOnce(Operation, DateTime<Utc>) -> Option<Decision<T>>,
        ) -> Result<(Option<Decision<T>>, Vec<OperationChange>), StoreError> {
            let Some(decision) = locked_now(tx, id).await?.and_then(|(op, now)| decide(op, now)) else {
                return Ok((None, Vec::new()));
            };
            let changes = stage(tx, &decision).await?;
            Ok((Some(decision), changes))
        }

        /// Selects up to `limit` unknown operations due for a lookup and moves their
        /// `next_reconcile_at` past the hold (see `LedgerStore::take_due_reconciliations`).
        async fn hold_due_reconciliations(
            tx: &mut $conn,
            tools: &[(ToolName, u32)],
            limit: u32,
            hold_seconds: u32,
        ) -> Result<Vec<Operation>, StoreError> {
            let now = now(tx).await?;
            // Tools are few: two placeholders each (name, end of grace), after the two
            // fixed ones.
            let per_tool: Vec<String> = (0..tools.len())
                .map(|i| format!("(tool = ${} and coalesce(unknown_since, updated_at) <= ${})", 2 * i + 3, 2 * i + 4))
                .collect();
            let sql = format!(
                "select {OPERATION_COLUMNS} from operations \
                 where status = 'unknown' and (next_reconcile_at is null or next_reconcile_at <= $1) \
                   and ({}) \
                 order by next_reconcile_at nulls first, id limit $2{}",
                per_tool.join(" or "),
                $skip_locked
            );
            let mut query = sqlx::query_as::<_, OperationRow>(&sql).bind(now).bind(i64::from(limit));
            for (tool, grace_ms) in tools {
                let grace_ends = now - chrono::Duration::milliseconds(i64::from(*grace_ms));
                query = query.bind(to_text(tool)).bind(grace_ends);
            }
            let rows = query.fetch_all(&mut *tx).await.map_err(store_error)?;
            let held_until = now + chrono::Duration::seconds(i64::from(hold_seconds));
            let mut taken = Vec::with_capacity(rows.len());
            for row in rows {
                let operation = Operation::try_from(row)?;
                // Not a state change: only the reconciler's own schedule moves.
                sqlx::query("update operations set next_reconcile_at = $1 where id = $2 and status = 'unknown'")
                    .bind(held_until)
                    .bind(operation.id)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_error)?;
                taken.push(operation);
            }
            Ok(taken)
        }

        /// Marks unknown up to `limit` pending operations whose lease ran out (see
        /// `LedgerStore::expire_leases`); answers how many, with the changes to publish.
        async fn expire_due_leases(
            tx: &mut $conn,
            limit: u32,
        ) -> Result<(usize, Vec<OperationChange>), StoreError> {
            let now = now(tx).await?;
            let sql = format!(
                "select {OPERATION_COLUMNS} from operations \
                 where status = 'pending' and lease_expires_at < $1 \
                   and effect in ('non_idempotent_write', 'irreversible') \
                 order by lease_expires_at limit $2{}",
                $skip_locked
            );
            let rows: Vec<OperationRow> = sqlx::query_as(&sql)
                .bind(now)
                .bind(i64::from(limit))
                .fetch_all(&mut *tx)
                .await
                .map_err(store_error)?;
            let count = rows.len();
            let mut changes = Vec::with_capacity(count);
            for row in rows {
                let decision = expire_lease_at(Operation::try_from(row)?, now);
                changes.extend(stage(tx, &decision).await?);
            }
            Ok((count, changes))
        }

        /// A claim that changes nothing (a replay, a duplicate in flight, a mismatch) is
        /// decided from a committed read, without taking the writer; `None` when the claim
        /// must be decided under the write lock (a new key, a lease to take over, …), where
        /// it is decided again.
        async fn decide_without_writing(
            store: &$store,
            request: &ClaimRequest,
            actor: &str,
            fresh: &Fresh,
        ) -> Result<Option<Decision<Claim>>, StoreError> {
            let finals = store.finals();
            let (live, now) = match finals.and_then(|f| f.get(&request.namespace, &request.key)) {
                Some(kept) => kept,
                None => {
                    let ticket = finals.map(FinalOutcomes::ticket);
                    let mut conn = store.$reader.acquire().await.map_err(store_error)?;
                    let Some((live, now)) = live_now(&mut conn, &request.namespace, &to_text(&request.key), false).await? else {
                        return Ok(None);
                    };
                    if let (Some(finals), Some(ticket)) = (finals, ticket) {
                        finals.keep(ticket, &live);
                    }
                    (live, now)
                }
            };
            let decision = decide_claim(Some(live), request, actor, fresh.clone(), now);
            Ok(decision.writes.is_empty().then_some(decision))
        }

        /// Runs a change (as `write`) and then, before its caller hears of it, forgets the
        /// final outcomes it changed. Where outcomes are kept, both run on a task of their
        /// own: the commit goes on if the caller goes away (a cancelled request), so the
        /// forgetting must not depend on the caller either.
        async fn write_and_forget<T, F>(store: &$store, work: F) -> Result<T, StoreError>
        where
            T: MadeWrites + Send + 'static,
            F: for<'c> Fn(&'c mut $conn) -> Staging<'c, T> + Send + 'static,
        {
            if store.finals().is_none() {
                return store.write(work).await;
            }
            let store = store.clone();
            tokio::spawn(async move {
                let made = store.write(work).await?;
                if let Some(finals) = store.finals() {
                    finals.forget_changed(made.writes());
                }
                Ok(made)
            })
            .await
            .map_err(|error| StoreError::Backend(Box::new(error)))?
        }

        #[async_trait::async_trait]
        impl LedgerStore for $store {
            async fn claim(
                &self,
                request: &ClaimRequest,
                actor: &str,
                fresh: Fresh,
            ) -> Result<Decision<Claim>, StoreError> {
                if let Some(decision) = decide_without_writing(self, request, actor, &fresh).await? {
                    return Ok(decision);
                }
                let input = Arc::new((request.clone(), actor.to_owned(), fresh));
                write_and_forget(self, move |tx| {
                    let input = input.clone();
                    Box::pin(async move {
                        let (request, actor, fresh) = &*input;
                        let (live, now) = match live_now(tx, &request.namespace, &to_text(&request.key), true).await? {
                            Some((live, now)) => (Some(live), now),
                            None => (None, now(tx).await?),
                        };
                        let decision = decide_claim(live, request, actor, fresh.clone(), now);
                        let changes = stage(tx, &decision).await?;
                        Ok((decision, changes))
                    })
                })
                .await
            }

            async fn report(
                &self,
                namespace: &Namespace,
                id: Uuid,
                token: &str,
                report: &Report,
                actor: &str,
            ) -> Result<Option<Decision<Result<Operation, ReportRefused>>>, StoreError> {
                let input = Arc::new((namespace.clone(), token.to_owned(), report.clone(), actor.to_owned()));
                write_and_forget(self, move |tx| {
                    let input = input.clone();
                    Box::pin(async move {
                        let (namespace, token, report, actor) = &*input;
                        decide_on(tx, id, |operation, now| {
                            (&operation.namespace == namespace)
                                .then(|| decide_report(operation, token, report, actor, now))
                        }).await
                    })
                })
                .await
            }

            async fn decide(
                &self,
                id: Uuid,
                verdict: &Verdict,
                username: &str,
            ) -> Result<Option<Decision<Result<Operation, VerdictRefused>>>, StoreError> {
                let input = Arc::new((verdict.clone(), username.to_owned()));
                write_and_forget(self, move |tx| {
                    let input = input.clone();
                    Box::pin(async move {
                        let (verdict, username) = &*input;
                        decide_on(tx, id, |operation, now| {
                            Some(decide_verdict(operation, verdict, username, now))
                        }).await
                    })
                })
                .await
            }

            async fn settle(
                &self,
                id: Uuid,
                settlement: &Settlement,
                actor: &str,
            ) -> Result<Option<Decision<Result<Operation, SettleRefused>>>, StoreError> {
                let input = Arc::new((settlement.clone(), actor.to_owned()));
                write_and_forget(self, move |tx| {
                    let input = input.clone();
                    Box::pin(async move {
                        let (settlement, actor) = &*input;
                        decide_on(tx, id, |operation, now| {
                            Some(decide_settlement(operation, settlement, actor, now))
                        }).await
                    })
                })
                .await
            }

            async fn take_due_reconciliations(
                &self,
                tools: &[(ToolName, u32)],
                limit: u32,
                hold_seconds: u32,
            ) -> Result<Vec<Operation>, StoreError> {
                if tools.is_empty() {
                    return Ok(Vec::new());
                }
                let input = Arc::new(tools.to_vec());
                self.write(move |tx| {
                    let input = input.clone();
                    Box::pin(async move {
                        let taken = hold_due_reconciliations(tx, &input, limit, hold_seconds).await?;
                        Ok((taken, Vec::new()))
                    })
                })
                .await
            }

            async fn expire_leases(&self, limit: u32) -> Result<usize, StoreError> {
                self.write(move |tx| Box::pin(expire_due_leases(tx, limit))).await
            }

            fn record_quiet_events(&self, events: Vec<Event>) {
                self.quiet_events.record(events);
            }

            async fn operation(&self, id: Uuid) -> Result<Option<Operation>, StoreError> {
                let mut conn = self.$reader.acquire().await.map_err(store_error)?;
                operation_by_id(&mut conn, id, false).await
            }

            async fn list(
                &self,
                filter: &OperationFilter,
                limit: u32,
            ) -> Result<Vec<Operation>, StoreError> {
                let rows: Vec<OperationRow> = list_query::<$db>(filter, limit)
                    .build_query_as()
                    .fetch_all(&self.$reader)
                    .await
                    .map_err(store_error)?;
                rows.into_iter().map(Operation::try_from).collect()
            }

            async fn events(&self, id: Uuid) -> Result<Vec<Event>, StoreError> {
                self.quiet_events.flush().await;
                // By time, not by insertion: quiet events are inserted behind, possibly after
                // a change that happened later; `seq` orders events of the same instant.
                let rows: Vec<EventRow> =
                    sqlx::query_as("select operation_id, at, kind, actor, detail from operation_events where operation_id = $1 order by at, seq")
                        .bind(id)
                        .fetch_all(&self.$reader)
                        .await
                        .map_err(store_error)?;
                rows.into_iter().map(Event::try_from).collect()
            }

            async fn tool(&self, name: &ToolName) -> Result<Option<ToolPolicy>, StoreError> {
                let row: Option<(Json<ToolPolicy>,)> =
                    sqlx::query_as("select policy from tools where name = $1")
                        .bind(to_text(name))
                        .fetch_optional(&self.$reader)
                        .await
                        .map_err(store_error)?;
                Ok(row.map(|(policy,)| policy.0))
            }

            async fn put_tool(
                &self,
                name: &ToolName,
                policy: &ToolPolicy,
            ) -> Result<RegisteredTool, StoreError> {
                let row: ToolRow = sqlx::query_as(
                    r#"insert into tools (name, policy, created_at, updated_at) values ($1, $2, $3, $3)
                       on conflict (name) do update set policy = excluded.policy, updated_at = excluded.updated_at
                       returning name, policy, created_at, updated_at"#,
                )
                .bind(to_text(name))
                .bind(Json(policy))
                .bind(Utc::now())

                .fetch_one(&self.$reader)
                .await
                .map_err(store_error)?;
                RegisteredTool::try_from(row)
            }

            async fn tools(&self) -> Result<Vec<RegisteredTool>, StoreError> {
                let rows: Vec<ToolRow> =
                    sqlx::query_as("select name, policy, created_at, updated_at from tools order by name")
                        .fetch_all(&self.$reader)
                        .await
                        .map_err(store_error)?;
                rows.into_iter().map(RegisteredTool::try_from).collect()
            }
        }
    };
}

pub(super) use impl_ledger_store;
