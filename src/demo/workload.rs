//! The simulated agent: forever, at a gentle pace, one action at a time against idem's REST
//! API. The actions come in shuffled rounds, so every kind shows up within each round while
//! their order stays unpredictable. Nothing it is answered ever stops it.

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::VecDeque;
use std::time::Duration;

use super::api::{AgentApi, Faults};
use super::scenario::Scenario;
use crate::workers::{stopped, StopSignal};

/// How many sent requests are remembered for replays and mismatches.
const MEMORY: usize = 32;

/// One thing the agent does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// A new intent idem runs (`invoke`): a lookup, an email or a refund.
    Fresh,
    /// A new intent the agent runs itself: claim, act, complete (sometimes as a failure).
    ClaimAndComplete,
    /// The same request again (a retry after a timeout): a replay.
    Replay,
    /// Two copies of a new request at once: one runs, one gets `409`.
    InFlightDuplicate,
    /// A remembered key with other arguments: `422`.
    Mismatch,
    /// A refund whose provider commits and then times out: `unknown`, then reconciled.
    Unknown,
    /// A refund the provider refuses for good: a stored, replayable failure.
    PermanentError,
    /// A deployment: it waits for a person (while fewer than a handful wait).
    Approval,
}

/// One round: each action as often as it should appear, replays and fresh work most.
const ROUND: [Action; 14] = [
    Action::Fresh,
    Action::Fresh,
    Action::Fresh,
    Action::ClaimAndComplete,
    Action::ClaimAndComplete,
    Action::Replay,
    Action::Replay,
    Action::Replay,
    Action::InFlightDuplicate,
    Action::Mismatch,
    Action::Unknown,
    Action::Unknown,
    Action::PermanentError,
    Action::Approval,
];

/// How a remembered request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /v1/tools/{tool}/invoke`.
    Invoke(&'static str),
    /// `POST /v1/operations`.
    Claim,
}

/// A request the agent sent and may send again.
#[derive(Debug, Clone)]
pub struct Sent {
    pub route: Route,
    pub body: Value,
}

/// The simulated agent and what it remembers.
pub struct Agent {
    pub(super) api: AgentApi,
    pub(super) faults: Faults,
    pub(super) scenario: Scenario,
    pub(super) rng: StdRng,
    next_intent: u64,
    memory: VecDeque<Sent>,
}

impl Agent {
    /// An agent using `api`, injecting faults with `faults`.
    pub fn new(api: AgentApi, faults: Faults) -> Self {
        let mut rng = StdRng::from_os_rng();
        let tag = format!("{:06x}", rng.random_range(0..0x100_0000u32));
        Self {
            api,
            faults,
            scenario: Scenario::new(tag),
            rng,
            next_intent: 0,
            memory: VecDeque::with_capacity(MEMORY),
        }
    }

    /// Acts until `stop` fires, pausing about `pace` (±50 %) between actions.
    pub async fn run(mut self, pace: Duration, stop: StopSignal) {
        let stop = stopped(stop);
        tokio::pin!(stop);
        let mut round = Vec::new();
        loop {
            if round.is_empty() {
                round = ROUND.to_vec();
                round.shuffle(&mut self.rng);
            }
            let action = round.pop().expect("a round is never empty here");
            tokio::select! {
                () = &mut stop => return,
                result = self.act(action) => match result {
                    Ok(()) => tracing::debug!(?action, "demo agent acted"),
                    Err(error) => tracing::warn!(?action, %error, "demo agent: unexpected answer; carrying on"),
                },
            }
            let pause = pace.mul_f64(self.rng.random_range(0.5..1.5));
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// The number of a new intent.
    pub(super) fn next_intent(&mut self) -> u64 {
        self.next_intent += 1;
        self.next_intent
    }

    /// Keeps a sent request for later replays, forgetting the oldest.
    pub(super) fn remember(&mut self, route: Route, body: Value) {
        if self.memory.len() == MEMORY {
            self.memory.pop_front();
        }
        self.memory.push_back(Sent { route, body });
    }

    /// A remembered request chosen at random, if any passes `filter`.
    pub(super) fn recall(&mut self, filter: impl Fn(&Sent) -> bool) -> Option<Sent> {
        let candidates: Vec<&Sent> = self.memory.iter().filter(|sent| filter(sent)).collect();
        candidates.choose(&mut self.rng).map(|sent| (*sent).clone())
    }
}
