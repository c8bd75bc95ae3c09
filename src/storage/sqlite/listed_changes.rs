//! The ledger's changes on SQLite that are only rows to write (see `lists`): a new key's
//! claim, and a completion decided from a read, guarded by what it read.

use app::domain::OperationStatus;
use app::ledger::{Claim, Decision, Event, Operation, OperationChange, Write};
use chrono::{DateTime, Utc};
use std::sync::LazyLock;

use super::direct::DirectStatement;
use super::lists::{Listed, ListedRows, Shape};
use crate::storage::ledger_sql::{
    push_event_tuples, push_insert_head, push_operation_row, push_updated_values, INSERT_EVENTS,
};
use crate::storage::operation_rows::{to_text, UpdatedValues, UPDATED_COLUMNS};
use crate::storage::push_sql::PushSql;

/// The events statement of a listed change, after its guarded write: the events follow
/// only if the write changed every row a list of such changes writes (`changes()`: the rows
/// the statement before changed).
fn push_guarded_events_head(sql: &mut DirectStatement<'_>) {
    sql.push(INSERT_EVENTS).push("select * from (values ");
}

fn push_guarded_events_tail(before: u64, sql: &mut DirectStatement<'_>) {
    sql.push(format_args!(") where changes() = {before}"));
}

/// A listed change's statements: its guarded write, then its events if it has any.
fn guarded_statements(events: &[Event]) -> usize {
    if events.is_empty() {
        1
    } else {
        2
    }
}

/// The rows a guarded write (statement 0) and its events (statement 1) change when applied.
fn guarded_rows(index: usize, events: &[Event]) -> u64 {
    match index {
        0 => 1,
        _ => events.len() as u64,
    }
}

/// The decision and its changes if its guarded write and events were staged, else `None`.
fn guarded_answer<T: Clone>(
    applied: bool,
    decision: &Decision<T>,
) -> (Option<Decision<T>>, Vec<OperationChange>) {
    match applied {
        true => (
            Some(decision.clone()),
            OperationChange::of_writes(&decision.writes),
        ),
        false => (None, Vec::new()),
    }
}

/// A new key's insert, which does nothing if the key has a live operation, and its events,
/// written only if the insert was. Each applies or not on its own, so a list of them may
/// hold claims of keys that turn out taken (claims tried unread, duplicates in flight).
pub(super) struct NewKeyClaim {
    pub(super) operation: Operation,
    events: Vec<Event>,
    decision: Decision<Claim>,
}

impl NewKeyClaim {
    /// The claim, if its decision is to insert a new operation and nothing else.
    pub(super) fn of(decision: Decision<Claim>) -> Option<Self> {
        let [Write::Insert(operation)] = decision.writes.as_slice() else {
            return None;
        };
        Some(Self {
            operation: operation.clone(),
            events: decision.state_events(),
            decision,
        })
    }
}

/// A list of new keys' claims: one multi-row insert of their operations, each row doing
/// nothing if its key has a live operation, then one insert of the events of those
/// inserted (an operation's id is new, so its row is there only if this list put it there).
impl ListedRows for NewKeyClaim {
    fn shape(&self) -> Shape {
        ("new key's claim", self.events.len())
    }

    fn statements(&self) -> usize {
        guarded_statements(&self.events)
    }

    fn push_head(&self, index: usize, sql: &mut DirectStatement<'_>) {
        match index {
            0 => push_insert_head(sql),
            _ => push_guarded_events_head(sql),
        }
    }

    fn push_applied<'a>(&'a self, sql: &mut DirectStatement<'a>) -> bool {
        sql.push("exists (select 1 from operations where id = ")
            .push_bind(self.operation.id)
            .push(")");
        true
    }

    fn push_rows<'a>(&'a self, index: usize, sql: &mut DirectStatement<'a>) {
        match index {
            0 => push_operation_row(sql, &self.operation),
            _ => push_event_tuples(sql, &self.events),
        }
    }

    fn push_tail(&self, index: usize, _before: u64, sql: &mut DirectStatement<'_>) {
        match index {
            0 => {
                sql.push(" on conflict do nothing");
            }
            _ => {
                sql.push(") as v where exists (select 1 from operations where id = v.column1)");
            }
        }
    }

    fn rows(&self, index: usize) -> u64 {
        guarded_rows(index, &self.events)
    }
}

impl Listed for NewKeyClaim {
    type Output = Option<Decision<Claim>>;

    fn answer(&self, applied: bool) -> (Self::Output, Vec<OperationChange>) {
        guarded_answer(applied, &self.decision)
    }
}

/// A decision's one update and its events, guarded by what the decision read: the status,
/// the lease and the last change's time. Any change to a pending operation moves its
/// status, or its lease (a takeover) and `updated_at`; so a row that still matches is the
/// row decided on. Nothing is staged when it does not match.
pub(super) struct UnchangedUpdate<T> {
    after: Operation,
    expected_status: OperationStatus,
    lease_token: String,
    read_updated_at: DateTime<Utc>,
    events: Vec<Event>,
    decision: Decision<T>,
}

impl<T> UnchangedUpdate<T> {
    /// The update, if the decision is one update of a leased operation.
    pub(super) fn of(before: &Operation, decision: Decision<T>) -> Option<Self> {
        let [Write::Update {
            after,
            expected_status,
        }] = decision.writes.as_slice()
        else {
            return None;
        };
        Some(Self {
            after: after.clone(),
            expected_status: *expected_status,
            lease_token: before.lease.as_ref()?.token_hash.as_str().to_owned(),
            read_updated_at: before.updated_at,
            events: decision.state_events(),
            decision,
        })
    }
}

/// A list of guarded updates: one `update … from (values …)` whose rows carry each
/// operation's new values and what its decision read (status, lease, `updated_at`), then
/// one insert of their events. The primary key's index is named (SQLite names the first
/// key of a table `sqlite_autoindex_<table>_1`): without it SQLite 3.46 scans every
/// operation for the join instead of looking each row up by id — milliseconds per list on
/// a busy ledger. With it, SQLite must take that index or fail the statement.
static UPDATE_UNCHANGED_HEAD: LazyLock<String> = LazyLock::new(|| {
    let new_values: Vec<String> = (5..=20).map(|column| format!("v.column{column}")).collect();
    format!(
        "update operations indexed by sqlite_autoindex_operations_1 \
         set ({UPDATED_COLUMNS}) = ({}) from (values ",
        new_values.join(", ")
    )
});

/// The guard: the row is still as the decision read it.
const UPDATE_UNCHANGED_TAIL: &str = ") as v where operations.id = v.column1 \
    and operations.status = v.column2 and operations.lease_token = v.column3 \
    and operations.updated_at = v.column4";

impl<T: Clone + Send + Sync + 'static> ListedRows for UnchangedUpdate<T> {
    fn shape(&self) -> Shape {
        ("update of an unchanged row", self.events.len())
    }

    fn statements(&self) -> usize {
        guarded_statements(&self.events)
    }

    fn push_head(&self, index: usize, sql: &mut DirectStatement<'_>) {
        match index {
            0 => {
                sql.push(UPDATE_UNCHANGED_HEAD.as_str());
            }
            _ => push_guarded_events_head(sql),
        }
    }

    /// `(id, status read, lease read, updated_at read, the new values…)`.
    fn push_rows<'a>(&'a self, index: usize, sql: &mut DirectStatement<'a>) {
        if index > 0 {
            return push_event_tuples(sql, &self.events);
        }
        sql.push("(");
        sql.commas()
            .push_bind(self.after.id)
            .push_bind(to_text(&self.expected_status))
            .push_bind(&self.lease_token)
            .push_bind(self.read_updated_at);
        sql.push(", ");
        push_updated_values(sql, UpdatedValues::from(&self.after));
        sql.push(")");
    }

    fn push_tail(&self, index: usize, before: u64, sql: &mut DirectStatement<'_>) {
        match index {
            0 => {
                sql.push(UPDATE_UNCHANGED_TAIL);
            }
            _ => push_guarded_events_tail(before, sql),
        }
    }

    fn rows(&self, index: usize) -> u64 {
        guarded_rows(index, &self.events)
    }
}

impl<T: Clone + Send + Sync + 'static> Listed for UnchangedUpdate<T> {
    type Output = Option<Decision<T>>;

    fn answer(&self, applied: bool) -> (Self::Output, Vec<OperationChange>) {
        guarded_answer(applied, &self.decision)
    }
}
