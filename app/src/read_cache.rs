//! A short-lived cache of rarely changing rows (API keys, tool policies) that every agent
//! request reads: it saves the hot path a database read per request.
//!
//! Two promises, both tested:
//! - a change made through this process invalidates the entry before the change's caller
//!   hears back, and a read that raced the change can never put the old row back
//!   (every invalidation bumps a generation; a fill taken before it is dropped);
//! - a change this process cannot see (another server on the same PostgreSQL, the command
//!   line on the same SQLite file) is picked up once the entry is `max_age` old.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Recently read values by key, each kept at most `max_age`, at most `capacity` of them.
pub struct ReadCache<K, V> {
    max_age: Duration,
    capacity: usize,
    state: Mutex<State<K, V>>,
}

struct State<K, V> {
    entries: HashMap<K, (Instant, V)>,
    generation: u64,
}

/// Taken before reading the database; a fill with a ticket older than the last invalidation
/// is ignored, since the row it read may be the one just replaced.
#[derive(Debug, Clone, Copy)]
pub struct FillTicket(u64);

impl<K: Eq + Hash, V: Clone> ReadCache<K, V> {
    /// A cache whose entries live `max_age` (zero: nothing is kept) and that holds at most
    /// `capacity` of them (full: it starts over, which only costs reads).
    pub fn new(max_age: Duration, capacity: usize) -> Self {
        Self {
            max_age,
            capacity,
            state: Mutex::new(State {
                entries: HashMap::new(),
                generation: 0,
            }),
        }
    }

    /// The value read for `key` less than `max_age` ago, if any.
    pub fn get(&self, key: &K) -> Option<V> {
        let state = self.state.lock().expect("read cache lock");
        let (read_at, value) = state.entries.get(key)?;
        (read_at.elapsed() < self.max_age).then(|| value.clone())
    }

    /// To be taken before the database read whose result goes to [`ReadCache::fill`].
    pub fn ticket(&self) -> FillTicket {
        FillTicket(self.state.lock().expect("read cache lock").generation)
    }

    /// Keeps what was read with `ticket`, unless something was invalidated since.
    pub fn fill(&self, ticket: FillTicket, key: K, value: V) {
        if self.max_age.is_zero() {
            return;
        }
        let mut state = self.state.lock().expect("read cache lock");
        if state.generation != ticket.0 {
            return;
        }
        if state.entries.len() >= self.capacity {
            state.entries.clear();
        }
        state.entries.insert(key, (Instant::now(), value));
    }

    /// Forgets `key` and turns away every fill read before now.
    pub fn invalidate(&self, key: &K) {
        let mut state = self.state.lock().expect("read cache lock");
        state.generation += 1;
        state.entries.remove(key);
    }

    /// Forgets everything and turns away every fill read before now.
    pub fn invalidate_all(&self) {
        let mut state = self.state.lock().expect("read cache lock");
        state.generation += 1;
        state.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> ReadCache<&'static str, u32> {
        ReadCache::new(Duration::from_secs(60), 2)
    }

    #[test]
    fn a_filled_value_is_served_until_invalidated() {
        let cache = cache();
        assert_eq!(cache.get(&"a"), None);
        cache.fill(cache.ticket(), "a", 1);
        assert_eq!(cache.get(&"a"), Some(1));
        cache.invalidate(&"a");
        assert_eq!(cache.get(&"a"), None);
    }

    #[test]
    fn a_read_that_raced_an_invalidation_is_not_kept() {
        let cache = cache();
        let ticket = cache.ticket();
        // The change commits and invalidates while the old row is on its way back.
        cache.invalidate(&"a");
        cache.fill(ticket, "a", 1);
        assert_eq!(cache.get(&"a"), None);
        cache.fill(cache.ticket(), "a", 2);
        assert_eq!(cache.get(&"a"), Some(2));
    }

    #[test]
    fn an_invalidation_of_another_key_also_turns_away_older_reads() {
        let cache = cache();
        let ticket = cache.ticket();
        cache.invalidate_all();
        cache.fill(ticket, "b", 1);
        assert_eq!(cache.get(&"b"), None);
    }

    #[test]
    fn entries_older_than_max_age_are_not_served() {
        let cache = ReadCache::new(Duration::from_millis(20), 10);
        cache.fill(cache.ticket(), "a", 1);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(cache.get(&"a"), None);
    }

    #[test]
    fn a_zero_max_age_keeps_nothing() {
        let cache = ReadCache::new(Duration::ZERO, 10);
        cache.fill(cache.ticket(), "a", 1);
        assert_eq!(cache.get(&"a"), None);
    }

    #[test]
    fn a_full_cache_starts_over_instead_of_growing() {
        let cache = cache();
        cache.fill(cache.ticket(), "a", 1);
        cache.fill(cache.ticket(), "b", 2);
        cache.fill(cache.ticket(), "c", 3);
        assert_eq!(cache.get(&"a"), None);
        assert_eq!(cache.get(&"c"), Some(3));
    }
}
