//! The vocabulary between the rules and the storage: a decision is an answer plus the writes
//! and events that must be committed together.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::model::{Event, Operation};
use crate::domain::OperationStatus;

/// A change to the operations table.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A new operation.
    Insert(Operation),
    /// Replace the mutable fields of an operation, guarded: applies only if the stored status
    /// is still `expected_status` (zero rows changed means someone else moved it).
    Update {
        after: Operation,
        expected_status: OperationStatus,
    },
    /// The key's life is over; the operation stays as history.
    Retire { id: Uuid, at: DateTime<Utc> },
}

/// What a rule decided: the answer, and what must be stored for it to be true.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision<T> {
    pub outcome: T,
    pub writes: Vec<Write>,
    /// State-changing events go in the same transaction as `writes`; the rest may follow.
    pub events: Vec<Event>,
}

impl<T> Decision<T> {
    /// A decision that writes no state, only events.
    pub fn answer(outcome: T, events: Vec<Event>) -> Self {
        Self {
            outcome,
            writes: Vec::new(),
            events,
        }
    }

    /// The operations it writes, as they will be stored.
    pub fn written(&self) -> impl Iterator<Item = &Operation> {
        self.writes.iter().filter_map(|write| match write {
            Write::Insert(operation)
            | Write::Update {
                after: operation, ..
            } => Some(operation),
            Write::Retire { .. } => None,
        })
    }

    /// The events that must commit with `writes`: those recording a change of state.
    pub fn state_events(&self) -> Vec<Event> {
        self.events
            .iter()
            .filter(|e| e.kind.changes_state())
            .cloned()
            .collect()
    }
}
