//! A realistic history written straight into a fresh database, fast: operations of several
//! namespaces and tools over the last seven days, mostly succeeded, some failed or `unknown`,
//! each with the events idem writes (claimed, then completed or marked unknown, and for some
//! a replay), in multi-row inserts inside large transactions.
//!
//! Rows are a pure function of their index (no random choices), so the mix is tested without
//! a database; ids are UUIDv7 of the creation time, so id order is creation order as the
//! server assumes.

use app::domain::{Fingerprint, ToolName};
use chrono::{DateTime, Duration, Utc};
use serde_json::{json, Value};
use uuid::{Builder, Uuid};

/// The namespaces the operations are spread over; the bench's API key reads the first.
pub const NAMESPACES: [&str; 4] = ["bench", "support", "billing", "ops"];

/// Tools and their effect classes, as agents register them.
const TOOLS: [(&str, &str); 5] = [
    ("payments.charge", "non_idempotent_write"),
    ("email.send", "irreversible"),
    ("crm.update_contact", "idempotent_write"),
    ("search.web", "read_only"),
    ("calendar.create_event", "non_idempotent_write"),
];

/// How far back the history goes.
pub const HISTORY: Duration = Duration::days(7);

/// What an operation ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedStatus {
    Succeeded,
    Failed,
    Unknown,
}

impl SeedStatus {
    /// 90 % succeeded, 8 % failed, 2 % unknown, by a roll in 0..100.
    fn pick(roll: u64) -> SeedStatus {
        match roll % 100 {
            0..90 => SeedStatus::Succeeded,
            90..98 => SeedStatus::Failed,
            _ => SeedStatus::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SeedStatus::Succeeded => "succeeded",
            SeedStatus::Failed => "failed",
            SeedStatus::Unknown => "unknown",
        }
    }
}

/// One event row.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedEvent {
    pub at: DateTime<Utc>,
    pub kind: &'static str,
    pub detail: Value,
}

/// One operation row and its events.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedOperation {
    pub id: Uuid,
    pub namespace: &'static str,
    pub key: String,
    pub tool: &'static str,
    pub effect: &'static str,
    pub fingerprint: String,
    pub args: Value,
    pub run_id: String,
    pub step: i64,
    pub status: SeedStatus,
    pub result: Option<Value>,
    pub error: Option<Value>,
    pub provider_ref: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
    pub unknown_since: Option<DateTime<Utc>>,
    pub events: Vec<SeedEvent>,
}

/// `count` operations spread evenly (with jitter) over the [`HISTORY`] before `end`.
#[derive(Debug, Clone)]
pub struct SeedPlan {
    pub count: u64,
    /// No operation or event is at or after this instant.
    pub end: DateTime<Utc>,
    tool_names: Vec<ToolName>,
}

/// The most operations a plan holds: two milliseconds apart at least, so that jittered
/// creation times never share a millisecond and UUIDv7 order is creation order.
pub const MOST_OPERATIONS: u64 = 300_000_000;

/// splitmix64: a well-spread number from an index, so rows vary without a random generator.
fn mix(index: u64, salt: u64) -> u64 {
    let mut z = index
        .wrapping_add(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SeedPlan {
    /// A plan whose newest events are a little before `now` (what a roll-up folds).
    pub fn new(count: u64, now: DateTime<Utc>) -> SeedPlan {
        assert!(
            count <= MOST_OPERATIONS,
            "at most {MOST_OPERATIONS} operations"
        );
        let tool_names = TOOLS
            .iter()
            .map(|(name, _)| ToolName::try_from(*name).expect("valid tool names"))
            .collect();
        SeedPlan {
            count,
            end: now - Duration::minutes(3),
            tool_names,
        }
    }

    fn start(&self) -> DateTime<Utc> {
        self.end - HISTORY
    }

    /// Operation `index` (0 = the oldest). Events follow their operation by at most a
    /// minute and stay before `end`.
    pub fn operation(&self, index: u64) -> SeedOperation {
        let created_at = self.created_at(index);
        let namespace = NAMESPACES[(mix(index, 1) % NAMESPACES.len() as u64) as usize];
        let tool_index = (mix(index, 2) % TOOLS.len() as u64) as usize;
        let (tool, effect) = TOOLS[tool_index];
        let status = SeedStatus::pick(mix(index, 3));
        let args = json!({ "amount_cents": 100 + mix(index, 4) % 10_000, "customer": format!("cus_{}", mix(index, 5) % 50_000) });
        let fingerprint = Fingerprint::compute(&self.tool_names[tool_index], &args, &[]);
        let settled_at = created_at + Duration::milliseconds(20 + (mix(index, 6) % 2_000) as i64);
        let key = format!("seed-{index}");
        let claimed = SeedEvent {
            at: created_at,
            kind: "claimed",
            detail: json!({ "attempt": 1, "key_source": "body", "effect": effect }),
        };
        let mut operation = SeedOperation {
            id: uuid_v7(created_at, mix(index, 10)),
            namespace,
            key,
            tool,
            effect,
            fingerprint: fingerprint.as_str().to_owned(),
            args,
            run_id: format!("run-{}", index / 20),
            step: (index % 20) as i64,
            status,
            result: None,
            error: None,
            provider_ref: None,
            created_at,
            updated_at: settled_at,
            completed_at: None,
            expires_at: created_at + Duration::days(1),
            unknown_since: None,
            events: vec![claimed],
        };
        self.settle(&mut operation, index, settled_at);
        operation
    }

    fn settle(&self, operation: &mut SeedOperation, index: u64, at: DateTime<Utc>) {
        match operation.status {
            SeedStatus::Succeeded | SeedStatus::Failed => {
                let succeeded = operation.status == SeedStatus::Succeeded;
                operation.completed_at = Some(at);
                if succeeded {
                    operation.result = Some(json!({ "ok": true, "receipt": format!("r_{index}") }));
                    operation.provider_ref = Some(format!("prov_{index}"));
                } else {
                    operation.error =
                        Some(json!({ "code": "declined", "message": "the provider declined" }));
                }
                operation.events.push(SeedEvent {
                    at,
                    kind: "completed",
                    detail: json!({ "status": operation.status.as_str(), "retryable": false, "provider_ref": operation.provider_ref, "attempt": 1 }),
                });
                // One in six successes is asked again later: a replay, which the metrics count.
                if succeeded && mix(index, 7).is_multiple_of(6) {
                    let replayed_at = at + Duration::seconds((mix(index, 8) % 50) as i64 + 1);
                    operation.events.push(SeedEvent {
                        at: replayed_at.min(self.end - Duration::milliseconds(1)),
                        kind: "replayed",
                        detail: json!({ "status": "succeeded", "key_source": "body" }),
                    });
                }
            }
            SeedStatus::Unknown => {
                let error = json!({ "message": "the provider timed out" });
                operation.unknown_since = Some(at);
                operation.events.push(SeedEvent {
                    at,
                    kind: "marked_unknown",
                    detail: json!({ "error": error, "attempt": 1 }),
                });
                operation.error = Some(error);
            }
        }
    }

    /// Evenly spaced from the start, each moved later by under half a gap, to the
    /// millisecond (UUIDv7's precision).
    fn created_at(&self, index: u64) -> DateTime<Utc> {
        let gap_ms = HISTORY.num_milliseconds() as f64 / self.count.max(1) as f64;
        let jitter = (mix(index, 9) % 1000) as f64 / 2000.0;
        let offset_ms = ((index as f64 + jitter) * gap_ms) as i64;
        self.start() + Duration::milliseconds(offset_ms)
    }

    /// The index of an operation of `namespace` near the middle of the history.
    pub fn middle_of(&self, namespace: &str) -> Option<u64> {
        (self.count / 2..self.count).take(1000).find(|&index| {
            NAMESPACES[(mix(index, 1) % NAMESPACES.len() as u64) as usize] == namespace
        })
    }
}

/// A UUIDv7 of this instant (its millisecond), the rest from `bits`, so the same row always
/// gets the same id and the bench can find it again.
fn uuid_v7(at: DateTime<Utc>, bits: u64) -> Uuid {
    let millis = at.timestamp_millis().max(0) as u64;
    let mut rest = [0u8; 10];
    rest[..8].copy_from_slice(&bits.to_le_bytes());
    rest[8..].copy_from_slice(&(bits as u16 ^ 0x5a5a).to_le_bytes());
    Builder::from_unix_timestamp_millis(millis, &rest).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(count: u64) -> SeedPlan {
        let now = DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        SeedPlan::new(count, now)
    }

    #[test]
    fn ids_are_uuid_v7_in_creation_order_within_the_last_seven_days() {
        let plan = plan(10_000);
        let operations: Vec<SeedOperation> = (0..plan.count).map(|i| plan.operation(i)).collect();
        for pair in operations.windows(2) {
            assert!(pair[0].created_at < pair[1].created_at);
            assert!(pair[0].id < pair[1].id, "id order is creation order");
        }
        assert!(operations.iter().all(|op| op.id.get_version_num() == 7));
        let first = &operations[0];
        let last = &operations[operations.len() - 1];
        assert!(first.created_at >= plan.end - HISTORY);
        assert!(last.created_at < plan.end);
        assert!(
            last.created_at > plan.end - Duration::minutes(2),
            "spread to the end"
        );
    }

    #[test]
    fn the_mix_is_mostly_succeeded_with_some_failed_and_unknown_over_every_namespace() {
        let plan = plan(20_000);
        let operations: Vec<SeedOperation> = (0..plan.count).map(|i| plan.operation(i)).collect();
        let share =
            |status| operations.iter().filter(|op| op.status == status).count() as f64 / 20_000.0;
        assert!((0.88..0.92).contains(&share(SeedStatus::Succeeded)));
        assert!((0.07..0.09).contains(&share(SeedStatus::Failed)));
        assert!((0.015..0.025).contains(&share(SeedStatus::Unknown)));
        for namespace in NAMESPACES {
            let count = operations
                .iter()
                .filter(|op| op.namespace == namespace)
                .count();
            assert!(count > 4_000, "{namespace}: {count}");
        }
        let replays = operations
            .iter()
            .flat_map(|op| &op.events)
            .filter(|event| event.kind == "replayed")
            .count();
        assert!(
            replays > 2_000,
            "replays give the metrics something to count: {replays}"
        );
    }

    #[test]
    fn each_operation_has_its_claim_then_its_outcome_and_events_stay_before_the_end() {
        let plan = plan(1_000);
        for index in 0..plan.count {
            let op = plan.operation(index);
            let kinds: Vec<&str> = op.events.iter().map(|e| e.kind).collect();
            match op.status {
                SeedStatus::Succeeded => {
                    assert!(
                        kinds == ["claimed", "completed"]
                            || kinds == ["claimed", "completed", "replayed"]
                    );
                    assert!(op.result.is_some() && op.completed_at.is_some());
                }
                SeedStatus::Failed => {
                    assert_eq!(kinds, ["claimed", "completed"]);
                    assert!(op.error.is_some() && op.completed_at.is_some());
                }
                SeedStatus::Unknown => {
                    assert_eq!(kinds, ["claimed", "marked_unknown"]);
                    assert!(op.unknown_since.is_some() && op.completed_at.is_none());
                }
            }
            assert_eq!(op.events[0].at, op.created_at);
            assert!(op.events.iter().all(|e| e.at < plan.end));
            let fingerprint =
                Fingerprint::compute(&ToolName::try_from(op.tool).unwrap(), &op.args, &[]);
            assert_eq!(op.fingerprint, fingerprint.as_str());
        }
    }

    #[test]
    fn rows_are_the_same_for_the_same_index() {
        let plan = plan(100);
        let (a, b) = (plan.operation(42), plan.operation(42));
        assert_eq!(a, b);
        let middle = plan.middle_of("bench").expect("an operation of bench");
        assert!(middle >= 50);
        assert_eq!(plan.operation(middle).namespace, "bench");
    }
}
