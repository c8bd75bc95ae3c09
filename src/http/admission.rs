//! Caps on what callers hold open for long: requests that wait (`Prefer: wait`) and change
//! streams. One API key gets at most so many of each at once, and the process at most so
//! many streams in all; beyond a cap the request is answered `429` with `Retry-After`, so one
//! misbehaving agent cannot tie up the server's connections and memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

use super::error::ApiError;

/// How long a refused caller should wait: held requests end within a minute.
const RETRY_AFTER_SECONDS: u64 = 5;

/// The caps, and what is held now.
pub struct Admission {
    caps: Caps,
    held: Mutex<Held>,
}

/// The configured caps.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Requests waiting at once per API key.
    pub waits_per_key: usize,
    /// Change streams open at once per API key.
    pub streams_per_key: usize,
    /// Change streams open at once in the process, of agents and people.
    pub streams: usize,
}

#[derive(Default)]
struct Held {
    waits: HashMap<Uuid, usize>,
    streams: HashMap<Uuid, usize>,
    streams_total: usize,
}

/// What a ticket holds.
#[derive(Clone, Copy)]
enum Kind {
    Wait(Uuid),
    /// A stream, of an API key or (`None`) of a person.
    Stream(Option<Uuid>),
}

/// A place held; given back when dropped (when the request or the stream ends).
pub struct Ticket {
    admission: Arc<Admission>,
    kind: Kind,
}

impl Admission {
    pub fn new(caps: Caps) -> Arc<Self> {
        Arc::new(Self {
            caps,
            held: Mutex::new(Held::default()),
        })
    }

    /// A place for a waiting request of the API key `key_id`.
    pub fn admit_wait(self: &Arc<Self>, key_id: Uuid) -> Result<Ticket, ApiError> {
        let mut held = self.lock();
        let waits = held.waits.entry(key_id).or_default();
        if *waits >= self.caps.waits_per_key {
            return Err(refused(format!(
                "this API key already has {} requests waiting (Prefer: wait); retry without \
                 waiting or later",
                self.caps.waits_per_key
            )));
        }
        *waits += 1;
        Ok(self.ticket(Kind::Wait(key_id)))
    }

    /// A place for a change stream of the API key `key_id`, or of a person (`None`).
    pub fn admit_stream(self: &Arc<Self>, key_id: Option<Uuid>) -> Result<Ticket, ApiError> {
        let mut held = self.lock();
        if held.streams_total >= self.caps.streams {
            return Err(refused(format!(
                "the server already serves {} change streams; retry later",
                self.caps.streams
            )));
        }
        if let Some(key_id) = key_id {
            let streams = held.streams.entry(key_id).or_default();
            if *streams >= self.caps.streams_per_key {
                return Err(refused(format!(
                    "this API key already has {} change streams open; close one first",
                    self.caps.streams_per_key
                )));
            }
            *streams += 1;
        }
        held.streams_total += 1;
        Ok(self.ticket(Kind::Stream(key_id)))
    }

    fn ticket(self: &Arc<Self>, kind: Kind) -> Ticket {
        Ticket {
            admission: self.clone(),
            kind,
        }
    }

    fn release(&self, kind: Kind) {
        let mut held = self.lock();
        match kind {
            Kind::Wait(key_id) => decrement(&mut held.waits, key_id),
            Kind::Stream(key_id) => {
                held.streams_total = held.streams_total.saturating_sub(1);
                if let Some(key_id) = key_id {
                    decrement(&mut held.streams, key_id);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        // Counts stay consistent after a panic elsewhere: each change is one statement.
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Counts one fewer for `key_id`, forgetting keys that hold nothing (so the map stays as
/// small as what is held now).
fn decrement(counts: &mut HashMap<Uuid, usize>, key_id: Uuid) {
    if let Some(count) = counts.get_mut(&key_id) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(&key_id);
        }
    }
}

fn refused(message: String) -> ApiError {
    ApiError::TooManyRequests {
        message,
        retry_after_seconds: RETRY_AFTER_SECONDS,
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.release(self.kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission() -> Arc<Admission> {
        Admission::new(Caps {
            waits_per_key: 2,
            streams_per_key: 1,
            streams: 2,
        })
    }

    #[test]
    fn a_key_waits_up_to_its_cap_and_again_once_a_wait_ends() {
        let admission = admission();
        let (key, other) = (Uuid::now_v7(), Uuid::now_v7());
        let first = admission.admit_wait(key).unwrap();
        let _second = admission.admit_wait(key).unwrap();
        assert!(admission.admit_wait(key).is_err(), "over the cap");
        assert!(
            admission.admit_wait(other).is_ok(),
            "another key has its own cap"
        );
        drop(first);
        assert!(admission.admit_wait(key).is_ok(), "a place came free");
    }

    #[test]
    fn streams_are_capped_per_key_and_in_all() {
        let admission = admission();
        let key = Uuid::now_v7();
        let agent = admission.admit_stream(Some(key)).unwrap();
        assert!(admission.admit_stream(Some(key)).is_err(), "per key");
        let _person = admission.admit_stream(None).unwrap();
        assert!(admission.admit_stream(None).is_err(), "in all");
        drop(agent);
        assert!(admission.admit_stream(None).is_ok());
        assert!(
            admission.lock().streams.is_empty(),
            "a key holding nothing is forgotten"
        );
    }
}
