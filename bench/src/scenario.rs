//! What `idem-bench` measures: each scenario, the database it runs on, and the floor its
//! throughput is compared with.

use serde::Serialize;

/// The database a row ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    Sqlite,
    Postgres,
}

impl Engine {
    /// The name in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Sqlite => "sqlite",
            Engine::Postgres => "postgres",
        }
    }
}

/// One kind of load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    /// Floor: the store's claim and completion transactions, called directly (no HTTP).
    StoreClaimComplete,
    /// Floor: a minimal axum JSON endpoint over the same HTTP client.
    AxumHello,
    /// Floor: idem's claim and completion writes as plain SQL run by `pgbench` (PostgreSQL).
    PgbenchClaimComplete,
    /// Floor: the same pgbench run with idem's `operations_announce` trigger disabled: the
    /// writes with no trigger at all (issue #33; the trigger no longer fires for them).
    PgbenchUnannouncedClaimComplete,
    /// Floor: the same writes through rusqlite on one SQLite connection, one pair after
    /// another, each transaction committed with its own fsync (no group commit).
    SequentialSqliteClaimComplete,
    /// Floor: the same writes through rusqlite, grouped into one transaction per batch by a
    /// writer thread that calls SQLite directly (group commit without sqlx's hand-overs).
    GroupedSqliteClaimComplete,
    /// idem over HTTP: claim a new key, then complete it.
    IdemNew,
    /// idem as one `idem serve` process on PostgreSQL: claim a new key, then complete it.
    IdemNewOneProcess,
    /// Two `idem serve` processes on one PostgreSQL database, the client's tasks split
    /// between them: claim a new key, then complete it at the same process.
    IdemNewTwoProcesses,
    /// idem over HTTP: new claim+complete started at half of the peak `IdemNew` rate, as
    /// independent agents arrive (an open loop), to read the latency at half of peak.
    IdemNewHalfPeak,
    /// The claims alone of `IdemNewHalfPeak` (each the first request of its step).
    IdemClaimHalfPeak,
    /// idem over HTTP: claim keys whose outcome is already stored (200, replayed).
    IdemReplay,
    /// idem over HTTP: every task claims one key while it is pending (409 each).
    IdemDuplicateStorm,
    /// idem over HTTP: 80 % new, 15 % replay, 5 % duplicate of a pending key.
    IdemMixed,
    /// One dashboard or REST read, sequentially, with many operations stored.
    Dashboard(DashboardRequest),
}

/// The reads that must stay fast with a million operations stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DashboardRequest {
    ApiUnknown,
    ApiSucceeded,
    ApiDetail,
    ApiMetrics,
    ApiMetricsWeek,
    ApiToolMetrics,
    PageUnknown,
    PageDetail,
    PageOverview,
    PageOverviewWeek,
}

impl DashboardRequest {
    /// Every request, in table order.
    pub const ALL: [DashboardRequest; 10] = [
        DashboardRequest::ApiUnknown,
        DashboardRequest::ApiSucceeded,
        DashboardRequest::ApiDetail,
        DashboardRequest::ApiMetrics,
        DashboardRequest::ApiMetricsWeek,
        DashboardRequest::ApiToolMetrics,
        DashboardRequest::PageUnknown,
        DashboardRequest::PageDetail,
        DashboardRequest::PageOverview,
        DashboardRequest::PageOverviewWeek,
    ];

    /// The request as the tables show it (`{id}`: an operation's id).
    pub fn path_label(self) -> &'static str {
        match self {
            DashboardRequest::ApiUnknown => "GET /v1/operations?status=unknown",
            DashboardRequest::ApiSucceeded => "GET /v1/operations?status=succeeded",
            DashboardRequest::ApiDetail => "GET /v1/operations/{id}",
            DashboardRequest::ApiMetrics => "GET /v1/metrics?window=24h",
            DashboardRequest::ApiMetricsWeek => "GET /v1/metrics?window=7d",
            DashboardRequest::ApiToolMetrics => "GET /v1/metrics/tools?window=24h",
            DashboardRequest::PageUnknown => "page /operations?status=unknown",
            DashboardRequest::PageDetail => "page /operations/{id}",
            DashboardRequest::PageOverview => "page /",
            DashboardRequest::PageOverviewWeek => "page /?window=7d",
        }
    }

    /// The row's scenario name.
    pub fn label(self) -> &'static str {
        match self {
            DashboardRequest::ApiUnknown => "dashboard: GET /v1/operations?status=unknown",
            DashboardRequest::ApiSucceeded => "dashboard: GET /v1/operations?status=succeeded",
            DashboardRequest::ApiDetail => "dashboard: GET /v1/operations/{id}",
            DashboardRequest::ApiMetrics => "dashboard: GET /v1/metrics?window=24h",
            DashboardRequest::ApiMetricsWeek => "dashboard: GET /v1/metrics?window=7d",
            DashboardRequest::ApiToolMetrics => "dashboard: GET /v1/metrics/tools?window=24h",
            DashboardRequest::PageUnknown => "dashboard: page /operations?status=unknown",
            DashboardRequest::PageDetail => "dashboard: page /operations/{id}",
            DashboardRequest::PageOverview => "dashboard: page /",
            DashboardRequest::PageOverviewWeek => "dashboard: page /?window=7d",
        }
    }

    /// The path to request, with `id` for the detail requests.
    pub fn path(self, id: &str) -> String {
        match self {
            DashboardRequest::ApiUnknown => "/v1/operations?status=unknown".into(),
            DashboardRequest::ApiSucceeded => "/v1/operations?status=succeeded".into(),
            DashboardRequest::ApiDetail => format!("/v1/operations/{id}"),
            DashboardRequest::ApiMetrics => "/v1/metrics?window=24h".into(),
            DashboardRequest::ApiMetricsWeek => "/v1/metrics?window=7d".into(),
            DashboardRequest::ApiToolMetrics => "/v1/metrics/tools?window=24h".into(),
            DashboardRequest::PageUnknown => "/operations?status=unknown".into(),
            DashboardRequest::PageDetail => format!("/operations/{id}"),
            DashboardRequest::PageOverview => "/".into(),
            DashboardRequest::PageOverviewWeek => "/?window=7d".into(),
        }
    }

    /// Whether the request is the REST API's (API key) rather than a page (session cookie).
    pub fn is_api(self) -> bool {
        matches!(
            self,
            DashboardRequest::ApiUnknown
                | DashboardRequest::ApiSucceeded
                | DashboardRequest::ApiDetail
                | DashboardRequest::ApiMetrics
                | DashboardRequest::ApiMetricsWeek
                | DashboardRequest::ApiToolMetrics
        )
    }
}

impl Scenario {
    /// Every scenario that runs on a database, in table order.
    pub const ON_A_DATABASE: [Scenario; 5] = [
        Scenario::StoreClaimComplete,
        Scenario::IdemNew,
        Scenario::IdemReplay,
        Scenario::IdemDuplicateStorm,
        Scenario::IdemMixed,
    ];

    /// The name in the table.
    pub fn label(self) -> &'static str {
        match self {
            Scenario::StoreClaimComplete => "floor: store claim+complete",
            Scenario::AxumHello => "floor: axum hello",
            Scenario::PgbenchClaimComplete => "floor: pgbench claim+complete",
            Scenario::PgbenchUnannouncedClaimComplete => {
                "floor: pgbench claim+complete, changes not announced"
            }
            Scenario::SequentialSqliteClaimComplete => "floor: sequential rusqlite claim+complete",
            Scenario::GroupedSqliteClaimComplete => "floor: grouped rusqlite claim+complete",
            Scenario::IdemNew => "idem: new claim+complete",
            Scenario::IdemNewOneProcess => "idem: new claim+complete, one server process",
            Scenario::IdemNewTwoProcesses => {
                "idem: new claim+complete, two server processes on one database"
            }
            Scenario::IdemNewHalfPeak => "idem: new claim+complete, open loop at half of peak",
            Scenario::IdemClaimHalfPeak => "idem: its claims alone, open loop at half of peak",
            Scenario::IdemReplay => "idem: replay",
            Scenario::IdemDuplicateStorm => "idem: in-flight duplicate storm",
            Scenario::IdemMixed => "idem: mixed 80/15/5",
            Scenario::Dashboard(request) => request.label(),
        }
    }

    /// Whether rows of this scenario are a floor others are compared with.
    pub fn is_floor(self) -> bool {
        matches!(
            self,
            Scenario::StoreClaimComplete
                | Scenario::AxumHello
                | Scenario::PgbenchClaimComplete
                | Scenario::PgbenchUnannouncedClaimComplete
                | Scenario::SequentialSqliteClaimComplete
                | Scenario::GroupedSqliteClaimComplete
        )
    }

    /// The floor this scenario's throughput is divided by: the store for work that writes,
    /// the bare HTTP stack for answers that (should) only read.
    pub fn floor(self) -> Option<Scenario> {
        match self {
            Scenario::StoreClaimComplete
            | Scenario::AxumHello
            | Scenario::PgbenchClaimComplete
            | Scenario::PgbenchUnannouncedClaimComplete
            | Scenario::SequentialSqliteClaimComplete
            | Scenario::GroupedSqliteClaimComplete => None,
            Scenario::IdemNew | Scenario::IdemMixed | Scenario::IdemNewOneProcess => {
                Some(Scenario::StoreClaimComplete)
            }
            // Read against one process of the same kind, started the same way.
            Scenario::IdemNewTwoProcesses => Some(Scenario::IdemNewOneProcess),
            Scenario::IdemReplay | Scenario::IdemDuplicateStorm => Some(Scenario::AxumHello),
            Scenario::IdemNewHalfPeak | Scenario::IdemClaimHalfPeak | Scenario::Dashboard(_) => {
                None
            }
        }
    }
}

/// What one step of the mixed workload does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MixedStep {
    New,
    Replay,
    Duplicate,
}

impl MixedStep {
    /// The step for a roll in 0..100: 80 % new, 15 % replay, 5 % duplicate.
    pub fn pick(roll: u32) -> MixedStep {
        match roll % 100 {
            0..80 => MixedStep::New,
            80..95 => MixedStep::Replay,
            _ => MixedStep::Duplicate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_is_80_new_15_replay_5_duplicate() {
        let steps: Vec<MixedStep> = (0..100).map(MixedStep::pick).collect();
        let count = |kind| steps.iter().filter(|s| **s == kind).count();
        assert_eq!(count(MixedStep::New), 80);
        assert_eq!(count(MixedStep::Replay), 15);
        assert_eq!(count(MixedStep::Duplicate), 5);
        assert_eq!(MixedStep::pick(180), MixedStep::Replay, "rolls wrap at 100");
    }

    #[test]
    fn writes_compare_with_the_store_and_reads_with_bare_http() {
        let cases = [
            (Scenario::StoreClaimComplete, None),
            (Scenario::AxumHello, None),
            (Scenario::IdemNew, Some(Scenario::StoreClaimComplete)),
            (Scenario::IdemMixed, Some(Scenario::StoreClaimComplete)),
            (Scenario::IdemReplay, Some(Scenario::AxumHello)),
            (Scenario::IdemDuplicateStorm, Some(Scenario::AxumHello)),
            (
                Scenario::IdemNewOneProcess,
                Some(Scenario::StoreClaimComplete),
            ),
            (
                Scenario::IdemNewTwoProcesses,
                Some(Scenario::IdemNewOneProcess),
            ),
        ];
        for (scenario, floor) in cases {
            assert_eq!(scenario.floor(), floor, "{scenario:?}");
        }
    }
}
