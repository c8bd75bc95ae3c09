//! The dashboard at scale: a fresh database seeded with many operations, the real server
//! started on it as a child process, and the time of each read a person or an agent makes
//! (sequential requests, so each is the server's time for one request plus loopback), with
//! the server's memory before and after.

mod insert;
mod seed;
pub(crate) mod server;

use anyhow::Context;
use app::domain::{Namespace, Role, Username};
use app::identity::{Identity, IdentityPolicy};
use app::ledger::metrics::unix_minute;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};
use std::str::FromStr;
use std::time::Instant;

use super::report::{median, Resource, Row, RunResult};
use super::scenario::{DashboardRequest, Engine, Scenario};
use super::targets::{RSS_AFTER, RSS_AT_REST};
use ::idem::storage::Database;
use insert::SeedPool;
use seed::{SeedPlan, NAMESPACES};
use server::{person_client, ChildServer};

/// Requests timed per kind of request, after a few untimed ones that warm caches up.
const TIMED_REQUESTS: usize = 50;
const WARM_UP_REQUESTS: usize = 3;

const USERNAME: &str = "bench-admin";

/// What the dashboard part of a run measured on one database.
pub struct DashboardResult {
    pub rows: Vec<Row>,
    pub resources: Vec<Resource>,
}

/// Who the bench is to the server.
struct Credentials {
    api_key: String,
    password: String,
}

/// Seeds `operations` into the fresh database at `url`, starts idem on it and times every
/// dashboard request.
pub async fn on_database(
    idem_bin: &std::path::Path,
    engine: Engine,
    url: &str,
    operations: u64,
) -> anyhow::Result<DashboardResult> {
    let credentials = prepare(url)
        .await
        .context("creating the schema and the bench's people")?;
    let plan = SeedPlan::new(operations, chrono::Utc::now());
    seed(engine, url, &plan)
        .await
        .context("seeding operations")?;
    roll_up_metrics(url)
        .await
        .context("rolling the seeded events up")?;

    let server = ChildServer::start(idem_bin, url).await?;
    let rss_at_rest = server.rss_mb();
    let cookie = server.sign_in(USERNAME, &credentials.password).await?;
    let clients = Clients {
        agent: agent_client(&credentials.api_key)?,
        person: person_client(cookie),
    };
    let middle = plan
        .middle_of(NAMESPACES[0])
        .context("no operation of the API key's namespace to read")?;
    let detail_id = plan.operation(middle).id.to_string();
    let mut rows = Vec::new();
    for request in DashboardRequest::ALL {
        eprint!(
            "{} ({}), {TIMED_REQUESTS} requests… ",
            request.label(),
            engine.as_str()
        );
        let url = format!("{}{}", server.base, request.path(&detail_id));
        let client = if request.is_api() {
            &clients.agent
        } else {
            &clients.person
        };
        let timed = time_requests(client, &url).await;
        eprintln!("median {:.1} ms", median(&timed.millis));
        if let Some(error) = &timed.first_error {
            eprintln!("  {} errors; the first: {error}", timed.errors);
        }
        rows.push(timed.row(request, engine));
    }
    let rss_after = server.rss_mb();
    server.stop().await;
    let database = Some(engine);
    let resource = |name: &str, value: f64| Resource {
        name: name.to_owned(),
        database,
        value,
        unit: "MB",
    };
    let resources = [(RSS_AT_REST, rss_at_rest), (RSS_AFTER, rss_after)]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| resource(name, v)))
        .collect();
    Ok(DashboardResult { rows, resources })
}

/// Creates the schema, an admin to sign in as and an API key of the first namespace.
async fn prepare(url: &str) -> anyhow::Result<Credentials> {
    let database = Database::open(url).await?;
    let identity = Identity::new(database.identity_store(), IdentityPolicy::default());
    let password = app::identity::random_token();
    identity
        .create_user(Username::try_from(USERNAME)?, Role::Admin, &password)
        .await?;
    let namespace = Namespace::try_from(NAMESPACES[0])?;
    let (_, secret) = identity
        .create_api_key(namespace, Some("bench".into()))
        .await?;
    database.close().await;
    Ok(Credentials {
        api_key: secret.expose().to_owned(),
        password,
    })
}

async fn seed(engine: Engine, url: &str, plan: &SeedPlan) -> anyhow::Result<()> {
    let pool = match engine {
        Engine::Sqlite => {
            // Seeding is set-up, not measured: a crash would only lose the bench's data.
            let options = sqlx::sqlite::SqliteConnectOptions::from_str(url)?
                .synchronous(sqlx::sqlite::SqliteSynchronous::Normal);
            SeedPool::Sqlite(sqlx::SqlitePool::connect_with(options).await?)
        }
        Engine::Postgres => SeedPool::Postgres(sqlx::PgPool::connect(url).await?),
    };
    let seconds = insert::write(&pool, plan, engine.as_str()).await?;
    // The roll-up starts from the first seeded minute, as it would have then.
    pool.rewind_rollup(unix_minute(plan.end - seed::HISTORY))
        .await?;
    pool.count_tools().await?;
    eprintln!(
        "  seeded {} operations into {} in {seconds:.0} s",
        plan.count,
        engine.as_str()
    );
    if let SeedPool::Postgres(pool) = &pool {
        // What autovacuum does soon after a bulk load, done now so that requests are timed in
        // the steady state: statistics for the planner, and the visibility map, without which
        // an index-only scan still fetches every row from the heap (the overview's gauges
        // took 142 ms instead of a few at 1 M operations).
        sqlx::query("vacuum analyze").execute(pool).await?;
    }
    pool.close().await;
    Ok(())
}

/// Folds the seeded events into per-minute counts, as the server's roll-up would have done
/// while they happened (left to the server, a week takes it 168 rounds of 15 s).
async fn roll_up_metrics(url: &str) -> anyhow::Result<()> {
    let database = Database::open(url).await?;
    let metrics = database.metrics_store();
    let started = Instant::now();
    let mut minutes = 0;
    loop {
        let folded = metrics.roll_up().await?;
        if folded == 0 {
            break;
        }
        minutes += folded;
    }
    eprintln!(
        "  rolled up {minutes} minutes of events in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    database.close().await;
    Ok(())
}

fn agent_client(api_key: &str) -> anyhow::Result<reqwest::Client> {
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {api_key}"))?,
    );
    Ok(reqwest::Client::builder()
        .default_headers(headers)
        .build()?)
}

struct Clients {
    agent: reqwest::Client,
    person: reqwest::Client,
}

/// The times of one kind of request.
struct Timed {
    millis: Vec<f64>,
    errors: u64,
    first_error: Option<String>,
    seconds: f64,
}

impl Timed {
    /// The row; with no request answered, its latencies are NaN (not measured).
    fn row(&self, request: DashboardRequest, engine: Engine) -> Row {
        let answered = !self.millis.is_empty();
        let run = RunResult {
            throughput: if self.seconds > 0.0 {
                self.millis.len() as f64 / self.seconds
            } else {
                0.0
            },
            p50_ms: if answered {
                median(&self.millis)
            } else {
                f64::NAN
            },
            p99_ms: if answered {
                percentile(&self.millis, 99.0)
            } else {
                f64::NAN
            },
            errors: self.errors,
        };
        Row::from_runs(Scenario::Dashboard(request), Some(engine), 1, &[run])
    }
}

/// Sends the request one after the other, timing each until its whole body is read.
async fn time_requests(client: &reqwest::Client, url: &str) -> Timed {
    let mut timed = Timed {
        millis: Vec::with_capacity(TIMED_REQUESTS),
        errors: 0,
        first_error: None,
        seconds: 0.0,
    };
    for _ in 0..WARM_UP_REQUESTS {
        let _ = fetch(client, url).await;
    }
    let started = Instant::now();
    for _ in 0..TIMED_REQUESTS {
        let begun = Instant::now();
        match fetch(client, url).await {
            Ok(()) => timed.millis.push(begun.elapsed().as_secs_f64() * 1000.0),
            Err(error) => {
                timed.errors += 1;
                timed.first_error.get_or_insert(error);
            }
        }
    }
    timed.seconds = started.elapsed().as_secs_f64();
    timed
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<(), String> {
    let answer = client.get(url).send().await.map_err(|e| e.to_string())?;
    let status = answer.status();
    let body = answer.bytes().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(())
    } else {
        let text: String = String::from_utf8_lossy(&body).chars().take(300).collect();
        Err(format!("{status}: {text}"))
    }
}

/// The nearest-rank percentile (0–100) of the values; 0 for none.
pub fn percentile(values: &[f64], percentile: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (percentile / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::idem::storage::testing::{Backend, TestDatabase};
    use app::domain::OperationStatus;
    use app::ledger::OperationFilter;
    use seed::SeedStatus;

    #[tokio::test]
    async fn seeded_operations_read_back_through_the_store_and_are_counted_as_the_server_would() {
        let database = TestDatabase::create(Backend::Sqlite).await;
        let url = database.url();
        prepare(url).await.expect("schema and people");
        let plan = SeedPlan::new(3_000, chrono::Utc::now());
        seed(Engine::Sqlite, url, &plan).await.expect("seeded");
        roll_up_metrics(url).await.expect("rolled up");

        let store = Database::open(url).await.expect("open");
        let ledger = store.ledger_store();
        let expected = plan.operation(1_500);
        let read = ledger
            .operation(expected.id)
            .await
            .unwrap()
            .expect("stored");
        assert_eq!(read.created_at, expected.created_at);
        assert_eq!(read.namespace.as_str(), expected.namespace);
        let events = ledger.events(expected.id).await.unwrap();
        assert_eq!(events.len(), expected.events.len());

        let operations: Vec<_> = (0..plan.count).map(|i| plan.operation(i)).collect();
        let unknown = operations
            .iter()
            .filter(|op| op.status == SeedStatus::Unknown)
            .count();
        let filter = OperationFilter {
            status: Some(OperationStatus::Unknown),
            ..Default::default()
        };
        let listed = ledger.list(&filter, 200).await.unwrap();
        assert_eq!(listed.len(), unknown.min(200));
        assert!(
            listed.windows(2).all(|pair| pair[0].id > pair[1].id),
            "newest first"
        );
        store.close().await;

        let replays = operations
            .iter()
            .flat_map(|op| &op.events)
            .filter(|event| event.kind == "replayed")
            .count() as i64;
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let mut folded = Vec::new();
        for table in ["event_minutes", "event_hours"] {
            let sum: i64 = sqlx::query_scalar(&format!(
                "select coalesce(sum(count), 0) from {table} where kind = 'replayed'"
            ))
            .fetch_one(&pool)
            .await
            .unwrap();
            folded.push(sum);
        }
        let counted = |table: &str| {
            format!("select coalesce(sum(count), 0) from {table} where measure = 'operations'")
        };
        let mut operations_counted = Vec::new();
        for table in ["tool_minutes", "tool_hours"] {
            let sum: i64 = sqlx::query_scalar(&counted(table))
                .fetch_one(&pool)
                .await
                .unwrap();
            operations_counted.push(sum);
        }
        pool.close().await;
        assert!(replays > 0);
        assert_eq!(
            folded,
            [replays, replays],
            "every seeded replay is in the counts by minute and by hour"
        );
        let seeded = plan.count as i64;
        assert_eq!(
            operations_counted,
            [seeded, seeded],
            "every seeded operation is in the table by tool, by minute and by hour"
        );
    }

    #[test]
    fn the_nearest_rank_percentile_of_fifty_requests_is_the_fiftieth_for_p99() {
        let values: Vec<f64> = (1..=50).rev().map(f64::from).collect();
        assert_eq!(percentile(&values, 99.0), 50.0);
        assert_eq!(percentile(&values, 50.0), 25.0);
        assert_eq!(percentile(&values, 0.0), 1.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
    }
}
