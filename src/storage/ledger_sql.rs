//! The ledger's SQL and its `LedgerStore` implementation, written once for both databases.
//!
//! The statements are the same text on SQLite and PostgreSQL (sqlx binds `$N` on both); what
//! differs comes from the `Dialect` (the row lock, the clock) and from [`LedgerBackend`]: how
//! a change is written (on SQLite many changes share one commit on the one writer; on
//! PostgreSQL a change decided under a row lock is a transaction of its own, and the changes
//! that are only rows to write share statements: group commit), how a key and its clock are
//! read, and the shortcuts each database takes past the write lock.

use app::domain::{IdempotencyKey, Namespace, ToolName, ToolPolicy};
use app::ledger::metrics::tool_ticks;
use app::ledger::{
    decide_claim, decide_report, decide_settlement, decide_verdict, expire_lease_at, Claim,
    ClaimRequest, Decision, Event, EventPage, EventPosition, Fresh, LedgerStore, Operation,
    OperationChange, OperationFilter, RegisteredTool, Report, ReportRefused, SettleRefused,
    Settlement, Verdict, VerdictRefused, Write,
};
use app::store_error::StoreError;
use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::QueryBuilder;
use std::future::Future;
use std::sync::Arc;
use uuid::Uuid;

use super::backend::{SqlBackend, SqlStore};
use super::dialect::{Bind, Dialect, Fetch, Run};
use super::kept_rows::{KeptRows, MadeWrites};
use super::operation_rows::{
    events_page_sql, list_query, to_text, CreatedValues, EventRow, OperationRow,
    PositionedEventRow, ToolRow, UpdatedValues, CREATED_COLUMNS, OPERATION_COLUMNS,
    UPDATED_COLUMNS,
};
use super::push_sql::PushSql;
use super::Staging;

/// A connection of `B`'s database.
pub(crate) type Conn<B> = <<B as SqlBackend>::Db as sqlx::Database>::Connection;

/// An operation and the time it was read at.
pub(crate) type ReadAt = (Operation, DateTime<Utc>);

/// What a database's store does its own way under the shared ledger.
pub(crate) trait LedgerBackend: SqlBackend {
    /// The rows it keeps in memory, if it may (see `KeptRows`).
    fn kept(&self) -> Option<&KeptRows>;

    /// Runs `work` in a write transaction and answers after its commit (on SQLite possibly
    /// together with other changes: group commit), publishing the changes `work` returns.
    fn write<T, F>(&self, work: F) -> impl Future<Output = Result<T, StoreError>> + Send
    where
        T: Send + 'static,
        F: for<'c> Fn(&'c mut Conn<Self>) -> Staging<'c, T> + Send + 'static;

    /// Runs a change that may replace a kept row (as `write`), and makes sure no rows kept
    /// in memory, in this process or (PostgreSQL) another, still hold what it replaced before
    /// its caller hears of it.
    fn write_and_forget<T, F>(&self, work: F) -> impl Future<Output = Result<T, StoreError>> + Send
    where
        T: MadeWrites + Send + 'static,
        F: for<'c> Fn(&'c mut Conn<Self>) -> Staging<'c, T> + Send + 'static;

    /// The live operation of a key (locked with `lock`, where the database locks rows) and
    /// the time it was read at, in one round trip where the database tells time.
    fn live_now(
        conn: &mut Conn<Self>,
        namespace: &Namespace,
        key: &str,
        lock: bool,
    ) -> impl Future<Output = Result<Option<ReadAt>, StoreError>> + Send;

    /// An operation by id, locked, and the time it was read at.
    fn locked_now(
        conn: &mut Conn<Self>,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<ReadAt>, StoreError>> + Send;

    /// The live operation of a key if any, unlocked, and the time it was read at, also when
    /// there is none.
    fn key_now(
        &self,
        namespace: &Namespace,
        key: &str,
    ) -> impl Future<Output = Result<(Option<Operation>, DateTime<Utc>), StoreError>> + Send;

    /// Writes a decision's writes and its state-changing events; `StoreError::Stale` when a
    /// write changed no row.
    fn stage_writes(
        conn: &mut Conn<Self>,
        writes: &[Write],
        events: &[Event],
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// A claim whose key had no live operation on the first read (at `read_at`), or was not
    /// read (`None`), written without reading (again); `None` when the key is taken (nothing
    /// was written): a key read before is then decided from a locked read, an unread one is
    /// read first.
    fn claim_new_key(
        &self,
        request: &ClaimRequest,
        actor: &str,
        fresh: &Fresh,
        read_at: Option<DateTime<Utc>>,
    ) -> impl Future<Output = Result<Option<Decision<Claim>>, StoreError>> + Send;

    /// Whether a claim of a key nothing is kept of may go straight to `claim_new_key`,
    /// unread: where the store keeps rows, for a key not seen live lately. A new key then
    /// costs no read, and a taken one an insert that does nothing before its read; a key
    /// seen taken is read first for a while (a storm of duplicates, retries of a replay).
    fn may_skip_read(&self, request: &ClaimRequest) -> bool {
        self.kept()
            .is_some_and(|kept| !kept.seen_live(&request.namespace, &request.key))
    }

    /// A claim found the key live: its next claims read first (see `may_skip_read`).
    fn key_taken(&self, namespace: &Namespace, key: &IdempotencyKey) {
        if let Some(kept) = self.kept() {
            kept.saw_live(namespace, key);
        }
    }

    /// A report decided from an unlocked read and written only if the operation is
    /// unchanged, if the database can; `None` sends it to be decided under the lock.
    fn report_from_read(
        &self,
        namespace: &Namespace,
        id: Uuid,
        token: &str,
        report: &Report,
        actor: &str,
    ) -> impl Future<Output = Result<Option<Decision<Result<Operation, ReportRefused>>>, StoreError>>
           + Send;
}

/// What the first, unlocked read of a claim's key found.
// Returned once per claim and matched at once: boxing the decision would only add an
// allocation to every replay.
#[allow(clippy::large_enum_variant)]
enum FirstRead {
    /// Nothing to write: the answer (a replay, a duplicate in flight, a mismatch).
    Decided(Decision<Claim>),
    /// No live operation at the time read: the key looks new.
    NewKey(DateTime<Utc>),
    /// Not read: nothing is known of the key, and the backend tries it as new first.
    Unread,
    /// The claim changes the operation; it is decided again under the write lock.
    MustWrite,
}

/// An operation by id (locked with the database's row lock if `lock`).
pub(crate) async fn operation_by_id<DB: Dialect>(
    conn: &mut DB::Connection,
    id: Uuid,
    lock: bool,
) -> Result<Option<Operation>, StoreError> {
    let lock = if lock { DB::ROW_LOCK } else { "" };
    let sql = format!("select {OPERATION_COLUMNS} from operations where id = $1{lock}");
    let row: Option<OperationRow> = DB::query_as(&sql).param(id).maybe_row(conn).await?;
    row.map(Operation::try_from).transpose()
}

/// Appends one write's statement to `sql`; it changes exactly one row when the operation is
/// as the decision read it.
pub(crate) fn push_write<DB: Dialect>(sql: &mut QueryBuilder<'_, DB>, write: &Write) {
    match write {
        Write::Insert(operation) => push_insert(sql, operation),
        Write::Update {
            after,
            expected_status,
        } => push_update(sql, after, to_text(expected_status)),
        Write::Retire { id, at } => {
            PushSql::push(sql, "update operations set retired_at = ");
            PushSql::push_bind(sql, *at);
            PushSql::push(sql, " where id = ");
            PushSql::push_bind(sql, *id);
            PushSql::push(sql, " and retired_at is null");
        }
    }
}

/// Appends the insert of a new operation to `sql`.
pub(crate) fn push_insert<DB: Dialect>(sql: &mut QueryBuilder<'_, DB>, operation: &Operation) {
    push_insert_head(sql);
    push_operation_row(sql, operation);
}

/// The start of an insert of operations, rows to follow.
pub(crate) fn push_insert_head<'a, DB: Dialect>(sql: &mut impl PushSql<'a, DB>) {
    sql.push(format_args!(
        "insert into operations ({CREATED_COLUMNS}, {UPDATED_COLUMNS}) values "
    ));
}

/// `(…)`: the operation's values in the order of `push_insert_head`'s columns.
pub(crate) fn push_operation_row<'a, DB: Dialect, S: PushSql<'a, DB>>(
    sql: &mut S,
    operation: &Operation,
) {
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
fn push_update<DB: Dialect>(
    sql: &mut QueryBuilder<'_, DB>,
    after: &Operation,
    expected_status: String,
) {
    PushSql::push(
        sql,
        format_args!("update operations set ({UPDATED_COLUMNS}) = ("),
    );
    push_updated_values(sql, UpdatedValues::from(after));
    PushSql::push(sql, ") where id = ");
    PushSql::push_bind(sql, after.id);
    PushSql::push(sql, " and status = ");
    PushSql::push_bind(sql, expected_status);
}

/// The values of `UPDATED_COLUMNS`, in their order, separated by `, `.
pub(crate) fn push_updated_values<'a, DB: Dialect, S: PushSql<'a, DB>>(
    sql: &mut S,
    v: UpdatedValues,
) {
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

/// Events per insert statement: five parameters a row, well under either database's limit
/// per statement.
pub(crate) const EVENTS_PER_STATEMENT: usize = 200;

/// The start of an insert of events, rows to follow.
pub(crate) const INSERT_EVENTS: &str =
    "insert into operation_events (operation_id, at, kind, actor, detail) ";

/// Appends `values (…), (…)` for `events` (at most `EVENTS_PER_STATEMENT`).
pub(crate) fn push_event_rows<'a, DB: Dialect>(
    sql: &mut QueryBuilder<'a, DB>,
    events: &'a [Event],
) {
    PushSql::push(sql, "values ");
    push_event_tuples(sql, events);
}

/// Appends `(…), (…)` for `events`, in the columns of `INSERT_EVENTS`.
pub(crate) fn push_event_tuples<'a, DB: Dialect, S: PushSql<'a, DB>>(
    sql: &mut S,
    events: &'a [Event],
) {
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
pub(crate) async fn insert_events<DB: Dialect>(
    tx: &mut DB::Connection,
    events: &[Event],
) -> Result<(), StoreError> {
    for chunk in events.chunks(EVENTS_PER_STATEMENT) {
        let mut insert = QueryBuilder::<DB>::new(INSERT_EVENTS);
        push_event_rows(&mut insert, chunk);
        DB::build(&mut insert).run(&mut *tx).await?;
    }
    Ok(())
}

/// Stages the decision's writes with its state-changing events in the open transaction, and
/// returns the changes to publish once it commits. A decision without writes (a refused
/// report) stages nothing.
async fn stage<B: LedgerBackend, T>(
    tx: &mut Conn<B>,
    decision: &Decision<T>,
) -> Result<Vec<OperationChange>, StoreError> {
    if decision.writes.is_empty() {
        return Ok(Vec::new());
    }
    B::stage_writes(tx, &decision.writes, &decision.state_events()).await?;
    Ok(OperationChange::of_writes(&decision.writes))
}

/// Decides on one operation under its lock, at the clock's time, and stages the decision;
/// `None` when there is no such operation or `decide` declines it (it is not the caller's).
async fn decide_on<B: LedgerBackend, T>(
    tx: &mut Conn<B>,
    id: Uuid,
    decide: impl FnOnce(Operation, DateTime<Utc>) -> Option<Decision<T>>,
) -> Result<(Option<Decision<T>>, Vec<OperationChange>), StoreError> {
    let Some(decision) = B::locked_now(tx, id)
        .await?
        .and_then(|(op, now)| decide(op, now))
    else {
        return Ok((None, Vec::new()));
    };
    let changes = stage::<B, T>(tx, &decision).await?;
    Ok((Some(decision), changes))
}

/// Selects up to `limit` unknown operations due for a lookup and moves their
/// `next_reconcile_at` past the hold (see `LedgerStore::take_due_reconciliations`).
async fn hold_due_reconciliations<DB: Dialect>(
    tx: &mut DB::Connection,
    tools: &[(ToolName, u32)],
    limit: u32,
    hold_seconds: u32,
) -> Result<Vec<Operation>, StoreError> {
    let now = DB::now(tx).await?;
    // Tools are few: two placeholders each (name, end of grace), after the two fixed ones.
    let per_tool: Vec<String> = (0..tools.len())
        .map(|i| {
            format!(
                "(tool = ${} and coalesce(unknown_since, updated_at) <= ${})",
                2 * i + 3,
                2 * i + 4
            )
        })
        .collect();
    let sql = format!(
        "select {OPERATION_COLUMNS} from operations \
         where status = 'unknown' and (next_reconcile_at is null or next_reconcile_at <= $1) \
           and ({}) \
         order by next_reconcile_at nulls first, id limit $2{}",
        per_tool.join(" or "),
        DB::SKIP_LOCKED
    );
    let mut query = DB::query_as::<OperationRow>(&sql)
        .param(now)
        .param(i64::from(limit));
    for (tool, grace_ms) in tools {
        let grace_ends = now - chrono::Duration::milliseconds(i64::from(*grace_ms));
        query = query.param(to_text(tool)).param(grace_ends);
    }
    let rows = query.rows(&mut *tx).await?;
    let held_until = now + chrono::Duration::seconds(i64::from(hold_seconds));
    let mut taken = Vec::with_capacity(rows.len());
    for row in rows {
        let operation = Operation::try_from(row)?;
        // Not a state change: only the reconciler's own schedule moves.
        sqlx::query::<DB>(
            "update operations set next_reconcile_at = $1 where id = $2 and status = 'unknown'",
        )
        .param(held_until)
        .param(operation.id)
        .run(&mut *tx)
        .await?;
        taken.push(operation);
    }
    Ok(taken)
}

/// Pending operations whose lease ran out before `$1`, of the effects that cannot be retried
/// blindly, the earliest first, at most `$2`: read through `operations_leases_due`, as far
/// as the leases that ran out (the condition is the index's word for word).
pub(crate) fn due_leases_sql<D: Dialect>() -> String {
    format!(
        "select {OPERATION_COLUMNS} from operations \
         where status = 'pending' and lease_expires_at < $1 \
           and effect in ('non_idempotent_write', 'irreversible') \
         order by lease_expires_at limit $2{}",
        D::SKIP_LOCKED
    )
}

/// Marks unknown up to `limit` pending operations whose lease ran out (see
/// `LedgerStore::expire_leases`); answers how many, with the changes to publish.
async fn expire_due_leases<B: LedgerBackend>(
    tx: &mut Conn<B>,
    limit: u32,
) -> Result<(usize, Vec<OperationChange>), StoreError> {
    let now = B::Db::now(tx).await?;
    let rows: Vec<OperationRow> = B::Db::query_as(&due_leases_sql::<B::Db>())
        .param(now)
        .param(i64::from(limit))
        .rows(&mut *tx)
        .await?;
    let count = rows.len();
    let mut changes = Vec::with_capacity(count);
    for row in rows {
        let decision = expire_lease_at(Operation::try_from(row)?, now);
        changes.extend(stage::<B, _>(tx, &decision).await?);
    }
    Ok((count, changes))
}

/// A claim that changes nothing (a replay, a duplicate in flight, a mismatch) is decided from
/// a committed read, without taking the writer; otherwise the claim is decided again under
/// the write lock, and the read tells whether the key looked new.
async fn decide_without_writing<B: LedgerBackend>(
    store: &B,
    request: &ClaimRequest,
    actor: &str,
    fresh: &Fresh,
    may_skip: bool,
) -> Result<FirstRead, StoreError> {
    let kept = store.kept();
    let (live, now) = match kept.and_then(|rows| rows.get(&request.namespace, &request.key)) {
        Some(kept) => kept,
        None if may_skip && store.may_skip_read(request) => return Ok(FirstRead::Unread),
        None => {
            let ticket = kept.map(KeptRows::ticket);
            let (live, now) = store
                .key_now(&request.namespace, &to_text(&request.key))
                .await?;
            let Some(live) = live else {
                return Ok(FirstRead::NewKey(now));
            };
            store.key_taken(&request.namespace, &request.key);
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

/// How a change to one operation is decided under its lock: from the operation, the
/// change's input and the clock's time; `None` declines it (the operation is not the
/// caller's).
type DecideLocked<I, T> = fn(Operation, &I, DateTime<Utc>) -> Option<Decision<T>>;

impl<B: LedgerBackend> SqlStore<B> {
    /// Decides a claim and writes the decision: at once for a new key when the backend can,
    /// else after reading the key, under its lock when there is something to write.
    async fn decide_claim(
        &self,
        request: &ClaimRequest,
        actor: &str,
        fresh: Fresh,
    ) -> Result<Decision<Claim>, StoreError> {
        let mut may_skip = true;
        loop {
            let read_at =
                match decide_without_writing(&self.0, request, actor, &fresh, may_skip).await? {
                    FirstRead::Decided(decision) => return Ok(decision),
                    FirstRead::MustWrite => break,
                    FirstRead::NewKey(read_at) => Some(read_at),
                    FirstRead::Unread => None,
                };
            if let Some(claimed) = self
                .0
                .claim_new_key(request, actor, &fresh, read_at)
                .await?
            {
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
        self.0
            .write_and_forget(move |tx| {
                let input = input.clone();
                Box::pin(async move {
                    let (request, actor, fresh) = &*input;
                    let (live, now) =
                        match B::live_now(tx, &request.namespace, &to_text(&request.key), true)
                            .await?
                        {
                            Some((live, now)) => (Some(live), now),
                            None => (None, B::Db::now(tx).await?),
                        };
                    let decision = decide_claim(live, request, actor, fresh.clone(), now);
                    let changes = stage::<B, _>(tx, &decision).await?;
                    Ok((decision, changes))
                })
            })
            .await
    }

    /// Decides on the operation `id` under its lock (see [`decide_on`]), writes the decision
    /// and counts it; `None` when there is no such operation or `decide` declines it.
    async fn decide_locked<I, T>(
        &self,
        id: Uuid,
        input: I,
        decide: DecideLocked<I, T>,
    ) -> Result<Option<Decision<T>>, StoreError>
    where
        I: Send + Sync + 'static,
        T: Send + Sync + 'static,
    {
        let input = Arc::new(input);
        self.0
            .write_and_forget(move |tx| {
                let input = input.clone();
                Box::pin(async move {
                    decide_on::<B, _>(tx, id, |operation, now| decide(operation, &input, now)).await
                })
            })
            .await
            .map(|decision| self.count(decision))
    }

    /// Counts what a decision on one operation wrote in the table by tool.
    fn count<T>(&self, decision: Option<Decision<T>>) -> Option<Decision<T>> {
        if let Some(decision) = &decision {
            let ticks = tool_ticks(&decision.events, decision.written());
            self.0.written_behind().count(ticks);
        }
        decision
    }
}

/// The live operations awaiting approval, counted from the small partial index
/// `operations_waiting` rather than from every row of the status.
pub fn count_awaiting_approval<DB: Dialect>() -> String {
    format!(
        "select count(*) from operations where {}",
        DB::AWAITING_APPROVAL_NOW
    )
}

#[async_trait::async_trait]
impl<B: LedgerBackend> LedgerStore for SqlStore<B> {
    async fn claim(
        &self,
        request: &ClaimRequest,
        actor: &str,
        fresh: Fresh,
    ) -> Result<Decision<Claim>, StoreError> {
        let decision = self.decide_claim(request, actor, fresh).await?;
        let about = decision.written().chain([decision.outcome.operation()]);
        self.0
            .written_behind()
            .count(tool_ticks(&decision.events, about));
        Ok(decision)
    }

    async fn report(
        &self,
        namespace: &Namespace,
        id: Uuid,
        token: &str,
        report: &Report,
        actor: &str,
    ) -> Result<Option<Decision<Result<Operation, ReportRefused>>>, StoreError> {
        if let Some(decided) = self
            .0
            .report_from_read(namespace, id, token, report, actor)
            .await?
        {
            return Ok(self.count(Some(decided)));
        }
        let input = (
            namespace.clone(),
            token.to_owned(),
            report.clone(),
            actor.to_owned(),
        );
        self.decide_locked(
            id,
            input,
            |operation, (namespace, token, report, actor), now| {
                (&operation.namespace == namespace)
                    .then(|| decide_report(operation, token, report, actor, now))
            },
        )
        .await
    }

    async fn decide(
        &self,
        id: Uuid,
        verdict: &Verdict,
        username: &str,
    ) -> Result<Option<Decision<Result<Operation, VerdictRefused>>>, StoreError> {
        let input = (verdict.clone(), username.to_owned());
        self.decide_locked(id, input, |operation, (verdict, username), now| {
            Some(decide_verdict(operation, verdict, username, now))
        })
        .await
    }

    async fn settle(
        &self,
        id: Uuid,
        settlement: &Settlement,
        actor: &str,
    ) -> Result<Option<Decision<Result<Operation, SettleRefused>>>, StoreError> {
        let input = (settlement.clone(), actor.to_owned());
        self.decide_locked(id, input, |operation, (settlement, actor), now| {
            Some(decide_settlement(operation, settlement, actor, now))
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
        self.0
            .write(move |tx| {
                let input = input.clone();
                Box::pin(async move {
                    let taken =
                        hold_due_reconciliations::<B::Db>(tx, &input, limit, hold_seconds).await?;
                    Ok((taken, Vec::new()))
                })
            })
            .await
    }

    async fn expire_leases(&self, limit: u32) -> Result<usize, StoreError> {
        self.0
            .write(move |tx| Box::pin(expire_due_leases::<B>(tx, limit)))
            .await
    }

    fn record_quiet_events(&self, events: Vec<Event>) {
        self.0.written_behind().record(events);
    }

    async fn operation(&self, id: Uuid) -> Result<Option<Operation>, StoreError> {
        let mut conn = self.0.read_connection().await?;
        operation_by_id::<B::Db>(&mut conn, id, false).await
    }

    async fn list(
        &self,
        filter: &OperationFilter,
        limit: u32,
    ) -> Result<Vec<Operation>, StoreError> {
        let mut conn = self.0.read_connection().await?;
        let now = B::Db::now(&mut conn).await?;
        let mut query = list_query::<B::Db>(filter, limit, now);
        let rows: Vec<OperationRow> = B::Db::build_query_as(&mut query).rows(&mut *conn).await?;
        rows.into_iter().map(Operation::try_from).collect()
    }

    async fn count_awaiting_approval(&self) -> Result<u64, StoreError> {
        let mut conn = self.0.read_connection().await?;
        let (count,): (i64,) = B::Db::query_as(&count_awaiting_approval::<B::Db>())
            .row(&mut *conn)
            .await?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    async fn events(&self, id: Uuid) -> Result<Vec<Event>, StoreError> {
        self.0.written_behind().flush().await;
        // By time, not by insertion: quiet events are inserted behind, possibly after
        // a change that happened later; `seq` orders events of the same instant.
        let rows: Vec<EventRow> =
            B::Db::query_as("select operation_id, at, kind, actor, detail from operation_events where operation_id = $1 order by at, seq")
                .param(id)
                .rows(&mut *self.0.read_connection().await?)
                .await?;
        rows.into_iter().map(Event::try_from).collect()
    }

    async fn events_page(
        &self,
        id: Uuid,
        page: &EventPage,
    ) -> Result<Vec<(EventPosition, Event)>, StoreError> {
        self.0.written_behind().flush().await;
        let mut query = B::Db::query_as::<PositionedEventRow>(events_page_sql(page)).param(id);
        if let Some(after) = page.after {
            query = query.param(after.at).param(after.seq);
        }
        let rows = query
            .param(i64::from(page.limit))
            .rows(&mut *self.0.read_connection().await?)
            .await?;
        rows.into_iter()
            .map(PositionedEventRow::into_positioned)
            .collect()
    }

    async fn tool(&self, name: &ToolName) -> Result<Option<ToolPolicy>, StoreError> {
        let row: Option<(Json<ToolPolicy>,)> =
            B::Db::query_as("select policy from tools where name = $1")
                .param(to_text(name))
                .maybe_row(&mut *self.0.read_connection().await?)
                .await?;
        Ok(row.map(|(policy,)| policy.0))
    }

    async fn put_tool(
        &self,
        name: &ToolName,
        policy: &ToolPolicy,
    ) -> Result<RegisteredTool, StoreError> {
        let row: ToolRow = B::Db::query_as(
            r#"insert into tools (name, policy, created_at, updated_at) values ($1, $2, $3, $3)
               on conflict (name) do update set policy = excluded.policy, updated_at = excluded.updated_at
               returning name, policy, created_at, updated_at"#,
        )
        .param(to_text(name))
        .param(Json(policy))
        .param(Utc::now())

        .row(&mut *self.0.read_connection().await?)
        .await?;
        RegisteredTool::try_from(row)
    }

    async fn tools(&self) -> Result<Vec<RegisteredTool>, StoreError> {
        let rows: Vec<ToolRow> =
            B::Db::query_as("select name, policy, created_at, updated_at from tools order by name")
                .rows(&mut *self.0.read_connection().await?)
                .await?;
        rows.into_iter().map(RegisteredTool::try_from).collect()
    }
}
