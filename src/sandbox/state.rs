//! The sandbox's memory: committed effects, what each idempotency key came to, queued
//! faults and the configuration. Plain data behind one mutex, never held across an await.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

use super::faults::{Call, Fault, FaultKind, FaultView};

/// One side effect the provider performed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effect {
    pub id: String,
    pub key: Option<String>,
    pub name: String,
    pub args: Value,
    pub at: DateTime<Utc>,
}

impl Effect {
    /// The provider's answer to the call that committed it (and to every replay of it).
    pub fn answer(&self) -> Value {
        json!({"id": self.id, "provider_ref": self.id, "name": self.name, "args": self.args})
    }
}

/// What an idempotency key has come to.
#[derive(Debug, Clone)]
enum KeyState {
    /// A call with the key is being processed; it remembers the call's parameters.
    InProgress { name: String, args: Value },
    /// The call committed this effect (an index into `effects`).
    Committed(usize),
}

/// What to do with a call, given its key.
#[derive(Debug, Clone, PartialEq)]
pub enum Begin {
    /// Go ahead and commit (the key, if any, is now in progress).
    Fresh,
    /// The key already committed this effect with the same parameters: answer it again.
    Replay(Effect),
    /// The key was used with different parameters.
    Reused,
    /// Another call with the key is still being processed.
    InProgress,
}

/// What a lookup by key finds.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    Effect(Effect),
    InProgress,
    Nothing,
}

/// The sandbox's state.
#[derive(Debug, Default)]
pub struct State {
    /// Monotonic across `/_reset`, so an old `provider_ref` never names a new effect.
    last_id: u64,
    effects: Vec<Effect>,
    keys: HashMap<String, KeyState>,
    faults: Vec<Fault>,
    ignore_keys: bool,
}

impl State {
    /// Decides how a call goes; a fresh call with a key marks the key in progress.
    pub fn begin(&mut self, key: Option<&str>, name: &str, args: &Value) -> Begin {
        let Some(key) = key.filter(|_| !self.ignore_keys) else {
            return Begin::Fresh;
        };
        let same = |n: &str, a: &Value| n == name && a == args;
        match self.keys.get(key) {
            None => {
                let state = KeyState::InProgress {
                    name: name.to_owned(),
                    args: args.clone(),
                };
                self.keys.insert(key.to_owned(), state);
                Begin::Fresh
            }
            Some(KeyState::InProgress { name, args }) if same(name, args) => Begin::InProgress,
            Some(KeyState::Committed(index)) => {
                let effect = &self.effects[*index];
                if same(&effect.name, &effect.args) {
                    Begin::Replay(effect.clone())
                } else {
                    Begin::Reused
                }
            }
            Some(KeyState::InProgress { .. }) => Begin::Reused,
        }
    }

    /// Commits the effect of a call that began `Fresh`.
    pub fn commit(&mut self, key: Option<&str>, name: &str, args: Value) -> Effect {
        self.last_id += 1;
        let effect = Effect {
            id: format!("eff_{}", self.last_id),
            key: key.map(str::to_owned),
            name: name.to_owned(),
            args,
            at: Utc::now(),
        };
        self.effects.push(effect.clone());
        if let Some(key) = key.filter(|_| !self.ignore_keys) {
            let committed = KeyState::Committed(self.effects.len() - 1);
            self.keys.insert(key.to_owned(), committed);
        }
        effect
    }

    /// What the provider knows about `key` for the action `name`: the first effect it
    /// committed, a call still in progress, or nothing.
    pub fn lookup(&self, name: &str, key: &str) -> Found {
        if let Some(effect) = self
            .effects
            .iter()
            .find(|e| e.name == name && e.key.as_deref() == Some(key))
        {
            return Found::Effect(effect.clone());
        }
        match self.keys.get(key) {
            Some(KeyState::InProgress { name: n, .. }) if n == name => Found::InProgress,
            _ => Found::Nothing,
        }
    }

    /// `GET /_effects`: the total, the count per key and every effect.
    pub fn effects_view(&self) -> Value {
        let mut by_key = BTreeMap::<&str, usize>::new();
        for key in self.effects.iter().filter_map(|e| e.key.as_deref()) {
            *by_key.entry(key).or_default() += 1;
        }
        json!({"total": self.effects.len(), "by_key": by_key, "effects": self.effects})
    }

    /// Queues a fault behind those already queued.
    pub fn push_fault(&mut self, fault: Fault) {
        self.faults.push(fault);
    }

    /// The queued faults, oldest first.
    pub fn faults_view(&self) -> Vec<FaultView> {
        self.faults.iter().map(FaultView::from).collect()
    }

    /// Consumes one use of the oldest fault matching the call, if any.
    pub fn take_fault(&mut self, call: Call<'_>) -> Option<FaultKind> {
        let index = self.faults.iter().position(|f| f.matches(call))?;
        let fault = &mut self.faults[index];
        fault.times -= 1;
        let kind = fault.kind;
        if fault.times == 0 {
            self.faults.remove(index);
        }
        Some(kind)
    }

    /// Switches the provider between honouring and ignoring `Idempotency-Key`.
    pub fn set_ignore_keys(&mut self, ignore: bool) {
        self.ignore_keys = ignore;
    }

    /// `GET /_config`.
    pub fn config_view(&self) -> Value {
        json!({"ignore_idempotency_keys": self.ignore_keys})
    }

    /// Forgets effects, keys, faults and configuration (but not the last effect id).
    pub fn reset(&mut self) {
        *self = Self {
            last_id: self.last_id,
            ..Self::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh_commit(state: &mut State, key: &str, args: Value) -> Effect {
        assert_eq!(state.begin(Some(key), "refund", &args), Begin::Fresh);
        state.commit(Some(key), "refund", args)
    }

    #[test]
    fn a_key_commits_once_and_replays_after() {
        let mut state = State::default();
        let args = json!({"amount": 5});
        let effect = fresh_commit(&mut state, "k", args.clone());
        assert_eq!(effect.id, "eff_1");
        assert_eq!(
            state.begin(Some("k"), "refund", &args),
            Begin::Replay(effect)
        );
        assert_eq!(
            state.begin(Some("k"), "refund", &json!({"amount": 6})),
            Begin::Reused
        );
        assert_eq!(state.begin(Some("k"), "email", &args), Begin::Reused);
        assert_eq!(state.effects_view()["total"], 1);
    }

    #[test]
    fn a_key_in_progress_is_neither_fresh_nor_found() {
        let mut state = State::default();
        let args = json!({});
        assert_eq!(state.begin(Some("k"), "refund", &args), Begin::Fresh);
        assert_eq!(state.begin(Some("k"), "refund", &args), Begin::InProgress);
        assert_eq!(state.lookup("refund", "k"), Found::InProgress);
        assert_eq!(state.lookup("email", "k"), Found::Nothing);
        state.commit(Some("k"), "refund", args.clone());
        assert!(matches!(state.lookup("refund", "k"), Found::Effect(_)));
    }

    #[test]
    fn ignoring_keys_commits_every_call_and_counts_them_per_key() {
        let mut state = State::default();
        state.set_ignore_keys(true);
        for _ in 0..3 {
            fresh_commit(&mut state, "k", json!({}));
        }
        state.commit(None, "refund", json!({}));
        let view = state.effects_view();
        assert_eq!(view["total"], 4);
        assert_eq!(view["by_key"], json!({"k": 3}));
        match state.lookup("refund", "k") {
            Found::Effect(effect) => assert_eq!(effect.id, "eff_1"),
            other => panic!("{other:?}"),
        }
        assert_eq!(state.lookup("email", "k"), Found::Nothing);
    }

    #[test]
    fn reset_forgets_everything_but_the_effect_counter() {
        let mut state = State::default();
        fresh_commit(&mut state, "k", json!({}));
        state.set_ignore_keys(true);
        state.reset();
        assert_eq!(state.effects_view()["total"], 0);
        assert_eq!(state.config_view()["ignore_idempotency_keys"], false);
        assert_eq!(fresh_commit(&mut state, "k", json!({})).id, "eff_2");
    }
}
