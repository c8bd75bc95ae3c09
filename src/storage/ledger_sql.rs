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
/// - on the store, `kept()`: the rows it keeps in memory, if it may (see
///   `KeptRows`; `KeptRows` itself must be in scope);
/// - `async fn live_now(&mut $conn, &Namespace, &str, lock: bool)` and
///   `async fn locked_now(&mut $conn, Uuid)`: an operation (the live one of a key; one by id,
///   locked) with the time it was read at, in one round trip where the database tells time;
/// - `async fn key_now(&mut $conn, &Namespace, &str)`: the live operation of a key if any,
///   unlocked, and the time it was read at, also when there is none;
///
/// - `async fn stage_writes(&mut $conn, &[Write], &[Event])`: a decision's writes and its
///   state-changing events, `StoreError::Stale` when a write changed no row;
/// - `async fn claim_new_key(&$store, &ClaimRequest, actor, &Fresh, read_at)`: a claim whose
///   key had no live operation on the first read (at `read_at`), or was not read (`None`),
///   written without reading (again); `None` when the key is taken (nothing was written): a
///   key read before is then decided from a locked read, an unread one is read first;
/// - `fn may_skip_read(&$store, &ClaimRequest)`: whether a claim of a key nothing is kept of
///   may go straight to `claim_new_key`, unread; `fn key_taken(&$store, &Namespace,
///   &IdempotencyKey)`: a claim found the key live (the next ones should read first);
/// - `async fn report_from_read(&$store, &Namespace, id, token, &Report, actor)`: a report
///   decided from an unlocked read and written only if the operation is unchanged, if the
///   backend can; `None` sends it to be decided under the lock.
/// - `async fn write_and_forget(&$store, work)`: runs a change that may replace a kept row
///   (as `write`), and makes sure no rows kept in memory, in this process or (PostgreSQL)
///   another, still hold what it replaced before its caller hears of it.
///
/// Changes are published by the backend: on SQLite after the commit, from what `write`'s work
/// returns; on PostgreSQL by a trigger inside the transaction (migration `announce_trigger`).
use app::ledger::{Claim, Decision};
use chrono::{DateTime, Utc};

/// What the first, unlocked read of a claim's key found.
// Returned once per claim and matched at once: boxing the decision would only add an
// allocation to every replay.
#[allow(clippy::large_enum_variant)]
pub(super) enum FirstRead {
    /// Nothing to write: the answer (a replay, a duplicate in flight, a mismatch).
    Decided(Decision<Claim>),
    /// No live operation at the time read: the key looks new.
    NewKey(DateTime<Utc>),
    /// Not read: nothing is known of the key, and the backend tries it as new first.
    Unread,
    /// The claim changes the operation; it is decided again under the write lock.
    MustWrite,
}

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

        /// Appends one write's statement to `sql`; it changes exactly one row when the
        /// operation is as the decision read it.
        fn push_write(sql: &mut sqlx::QueryBuilder<'_, $db>, write: &Write) {
            match write {
                Write::Insert(operation) => push_insert(sql, operation),
                Write::Update { after, expected_status } => {
                    push_update(sql, after, to_text(expected_status))
                }
                Write::Retire { id, at } => {
                    sql.push("update operations set retired_at = ")
                        .push_bind(*at)
                        .push(" where id = ")
                        .push_bind(*id)
                        .push(" and retired_at is null");
                }
            }
        }

        fn push_insert(sql: &mut sqlx::QueryBuilder<'_, $db>, operation: &Operation) {
            push_insert_head(sql);
            push_operation_row(sql, operation);
        }

        /// The start of an insert of operations, rows to follow.
        fn push_insert_head<'a>(sql: &mut impl $crate::storage::push_sql::PushSql<'a, $db>) {
            sql.push(format_args!(
                "insert into operations ({CREATED_COLUMNS}, {UPDATED_COLUMNS}) values "
            ));
        }

        /// `(…)`: the operation's values in the order of `push_insert_head`'s columns.
        fn push_operation_row<'a, S: $crate::storage::push_sql::PushSql<'a, $db>>(sql: &mut S, operation: &Operation) {
            let v = CreatedValues::from(operation);
            sql.push("(");
            sql.commas()
                .push_bind(v.id)
                .push_bind(v.namespace)
                .push_bind(v.key)
                .push_bind(v.key_source)
                .push_bind(v.tool)
                .push_bind(v.effect)
                .push_bind(v.fingerprint)
                .push_bind(v.provider_key)
                .push_bind(v.args)
                .push_bind(v.run_id)
                .push_bind(v.step)
                .push_bind(v.created_at)
                .push_bind(v.runner)
                .push_bind(v.ttl_seconds);
            sql.push(", ");
            push_updated_values(sql, UpdatedValues::from(operation));
            sql.push(")");
        }

        /// The guarded transition: applies only while the stored status is `expected_status`.
        fn push_update(sql: &mut sqlx::QueryBuilder<'_, $db>, after: &Operation, expected_status: String) {
            sql.push(format_args!("update operations set ({UPDATED_COLUMNS}) = ("));
            push_updated_values(sql, UpdatedValues::from(after));
            sql.push(") where id = ").push_bind(after.id)
                .push(" and status = ").push_bind(expected_status);
        }

        /// The values of `UPDATED_COLUMNS`, in their order, separated by `, `.
        fn push_updated_values<'a, S: $crate::storage::push_sql::PushSql<'a, $db>>(sql: &mut S, v: UpdatedValues) {
            sql.commas()
                .push_bind(v.status)
                .push_bind(v.attempt)
                .push_bind(v.result)
                .push_bind(v.error)
                .push_bind(v.retryable)
                .push_bind(v.provider_ref)
                .push_bind(v.lease_token)
                .push_bind(v.lease_expires_at)
                .push_bind(v.updated_at)
                .push_bind(v.completed_at)
                .push_bind(v.expires_at)
                .push_bind(v.approval)
                .push_bind(v.approval_expires_at)
                .push_bind(v.unknown_since)
                .push_bind(v.reconcile_attempts)
                .push_bind(v.next_reconcile_at);
        }

        /// Events per insert statement: five parameters a row, well under either
        /// database's limit per statement.
        const EVENTS_PER_STATEMENT: usize = 200;

        /// The start of an insert of events, rows to follow.
        const INSERT_EVENTS: &str = "insert into operation_events (operation_id, at, kind, actor, detail) ";

        /// Appends `values (…), (…)` for `events` (at most `EVENTS_PER_STATEMENT`).
        fn push_event_rows<'a>(sql: &mut sqlx::QueryBuilder<'a, $db>, events: &'a [Event]) {
            sql.push("values ");
            push_event_tuples(sql, events);
        }

        /// Appends `(…), (…)` for `events`, in the columns of `INSERT_EVENTS`.
        fn push_event_tuples<'a, S: $crate::storage::push_sql::PushSql<'a, $db>>(sql: &mut S, events: &'a [Event]) {
            for (n, event) in events.iter().enumerate() {
                if n > 0 {
                    sql.push(", ");
                }
                sql.push("(");
                sql.commas()
                    .push_bind(event.operation_id)
                    .push_bind(event.at)
                    .push_bind(event.kind.as_str())
                    .push_bind(&event.actor)
                    .push_bind(Json(&event.detail));
                sql.push(")");
            }
        }

        /// Inserts events, many rows per statement (a statement costs far more than a row).
        async fn insert_events(tx: &mut $conn, events: &[Event]) -> Result<(), StoreError> {
            for chunk in events.chunks(EVENTS_PER_STATEMENT) {
                let mut insert = sqlx::QueryBuilder::<$db>::new(INSERT_EVENTS);
                push_event_rows(&mut insert, chunk);
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
            stage_writes(tx, &decision.writes, &decision.state_events()).await?;
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
        /// decided from a committed read, without taking the writer; otherwise the claim is
        /// decided again under the write lock, and the read tells whether the key looked new.
        async fn decide_without_writing(
            store: &$store,
            request: &ClaimRequest,
            actor: &str,
            fresh: &Fresh,
            may_skip: bool,
        ) -> Result<FirstRead, StoreError> {
            let kept = store.kept();
            let (live, now) = match kept.and_then(|rows| rows.get(&request.namespace, &request.key)) {
                Some(kept) => kept,
                None if may_skip && may_skip_read(store, request) => return Ok(FirstRead::Unread),
                None => {
                    let ticket = kept.map(KeptRows::ticket);
                    let mut conn = store.$reader.acquire().await.map_err(store_error)?;
                    let (live, now) = key_now(&mut conn, &request.namespace, &to_text(&request.key)).await?;
                    let Some(live) = live else {
                        return Ok(FirstRead::NewKey(now));
                    };
                    key_taken(store, &request.namespace, &request.key);
                    if let (Some(kept), Some(ticket)) = (kept, ticket) {
                        kept.keep(ticket, &live);
                    }
                    (live, now)
                }
            };
            let decision = decide_claim(Some(live), request, actor, fresh.clone(), now);
            Ok(if decision.writes.is_empty() {
                FirstRead::Decided(decision)
            } else {
                FirstRead::MustWrite
            })
        }

        #[async_trait::async_trait]
        impl LedgerStore for $store {
            async fn claim(
                &self,
                request: &ClaimRequest,
                actor: &str,
                fresh: Fresh,
            ) -> Result<Decision<Claim>, StoreError> {
                let mut may_skip = true;
                loop {
                    let read_at = match decide_without_writing(self, request, actor, &fresh, may_skip).await? {
                        FirstRead::Decided(decision) => return Ok(decision),
                        FirstRead::MustWrite => break,
                        FirstRead::NewKey(read_at) => Some(read_at),
                        FirstRead::Unread => None,
                    };
                    if let Some(claimed) = claim_new_key(self, request, actor, &fresh, read_at).await? {
                        return Ok(claimed);
                    }
                    if read_at.is_some() {
                        break;
                    }
                    // Tried unread and found taken (a replay, a duplicate in flight): read it
                    // (a read that finds the key live remembers it, so its next claims read first).
                    may_skip = false;
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
                if let Some(decided) = report_from_read(self, namespace, id, token, report, actor).await? {
                    return Ok(Some(decided));
                }
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

            async fn events_page(
                &self,
                id: Uuid,
                page: &app::ledger::EventPage,
            ) -> Result<Vec<(app::ledger::EventPosition, Event)>, StoreError> {
                use crate::storage::operation_rows::{events_page_sql, PositionedEventRow};
                self.quiet_events.flush().await;
                let mut query =
                    sqlx::query_as::<_, PositionedEventRow>(events_page_sql(page)).bind(id);
                if let Some(after) = page.after {
                    query = query.bind(after.at).bind(after.seq);
                }
                let rows = query
                    .bind(i64::from(page.limit))
                    .fetch_all(&self.$reader)
                    .await
                    .map_err(store_error)?;
                rows.into_iter().map(PositionedEventRow::into_positioned).collect()
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
