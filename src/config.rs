//! Configuration of `idem serve`: flags, each with an `IDEM_*` environment variable.

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Where the data lives; every subcommand takes it.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// `sqlite://PATH` (created if missing) or `postgres://…`.
    #[arg(long, env = "IDEM_DATABASE_URL", default_value = "sqlite://idem.db")]
    pub database_url: String,
}

/// Everything `idem serve` needs.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "IDEM_BIND", default_value = "127.0.0.1:3000")]
    pub bind: String,

    #[command(flatten)]
    pub database: DatabaseArgs,

    /// The URL people use to reach idem; `https://…` makes the session cookie `Secure`.
    #[arg(long, env = "IDEM_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Folder with the compiled UI (`pkg/`) and static files, as built by `make build`.
    #[arg(long, env = "IDEM_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,

    /// Largest accepted request body, in bytes.
    #[arg(long, env = "IDEM_MAX_BODY_BYTES", default_value_t = 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Requests running longer than this are answered 408 (seconds). Must exceed the longest
    /// `Prefer: wait` (60 s).
    #[arg(long, env = "IDEM_REQUEST_TIMEOUT_SECS", default_value_t = 75)]
    pub request_timeout_secs: u64,

    /// How often expired leases are looked for, in milliseconds.
    #[arg(long, env = "IDEM_LEASE_REAPER_INTERVAL_MS", default_value_t = 1000)]
    pub lease_reaper_interval_ms: u64,

    /// How often past minutes of events are folded into per-minute counts for
    /// `GET /v1/metrics`, in milliseconds.
    #[arg(
        long,
        env = "IDEM_METRICS_ROLLUP_INTERVAL_MS",
        default_value_t = 15_000
    )]
    pub metrics_rollup_interval_ms: u64,
    /// Days an operation is kept after its `expires_at` before it and its events are
    /// deleted; 0 keeps everything forever.
    #[arg(long, env = "IDEM_RETENTION_DAYS", default_value_t = 30)]
    pub retention_days: u64,
    /// How often `unknown` operations are looked for to reconcile, in milliseconds.
    #[arg(long, env = "IDEM_RECONCILE_INTERVAL_MS", default_value_t = 1000)]
    pub reconcile_interval_ms: u64,

    /// POST every new request for approval here as JSON (retried, never blocking the claim).
    #[arg(long, env = "IDEM_APPROVAL_WEBHOOK_URL")]
    pub approval_webhook_url: Option<String>,

    /// Pauses before each retry of a failed webhook delivery, in milliseconds, comma-separated;
    /// after the last, the delivery is given up.
    #[arg(
        long,
        env = "IDEM_APPROVAL_WEBHOOK_RETRY_MS",
        value_delimiter = ',',
        default_value = "1000,5000,30000,120000"
    )]
    pub approval_webhook_retry_ms: Vec<u64>,
    /// POST an alert here as JSON when a condition starts and when it clears: stuck unknowns,
    /// a request for approval waiting too long, reconciliation failing for a tool.
    #[arg(long, env = "IDEM_ALERT_WEBHOOK_URL")]
    pub alert_webhook_url: Option<String>,

    /// How often the alert conditions are looked at, in milliseconds.
    #[arg(long, env = "IDEM_ALERT_INTERVAL_MS", default_value_t = 30_000,
        value_parser = clap::value_parser!(u64).range(10..))]
    pub alert_interval_ms: u64,

    /// An operation `unknown` for longer than this is stuck: `<N>s`, `<N>m` or `<N>h`, from 1
    /// second up to 7 days. Counted on the overview, in `/v1/metrics` and `/metrics`, and by
    /// the `stuck_unknowns` alert.
    #[arg(long, env = "IDEM_STUCK_AFTER", default_value = "15m", value_parser = stuck_after)]
    pub stuck_after: chrono::TimeDelta,

    /// Stuck unknowns (see `IDEM_STUCK_AFTER`) tolerated before `stuck_unknowns` fires.
    #[arg(long, env = "IDEM_ALERT_STUCK_UNKNOWNS", default_value_t = 0)]
    pub alert_stuck_unknowns: u64,

    /// A request for approval older than this many minutes fires `approval_waiting`.
    #[arg(long, env = "IDEM_ALERT_APPROVAL_WAIT_MINUTES", default_value_t = 60)]
    pub alert_approval_wait_minutes: u32,

    /// An unknown operation whose reconciliation was tried this many times fires
    /// `reconciliation_failing` for its tool.
    #[arg(long, env = "IDEM_ALERT_RECONCILE_ATTEMPTS", default_value_t = 3,
        value_parser = clap::value_parser!(u32).range(1..))]
    pub alert_reconcile_attempts: u32,

    /// A session unused for this many minutes is over; every session also ends 12 hours
    /// after sign-in.
    #[arg(
        long = "session-idle-minutes",
        env = "IDEM_SESSION_IDLE_MINUTES",
        default_value = "30",
        value_parser = minutes
    )]
    pub session_idle: Duration,

    /// Requests per second each API key may make on average; 0 turns the limit off.
    #[arg(long, env = "IDEM_RATE_LIMIT_PER_SECOND", default_value_t = 1000)]
    pub rate_limit_per_second: u32,

    /// Requests an API key may make in a burst before the average applies (at least 1).
    #[arg(
        long,
        env = "IDEM_RATE_LIMIT_BURST",
        default_value_t = 2000,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub rate_limit_burst: u32,

    /// Requests one API key may hold waiting at once (`Prefer: wait`); more are answered
    /// 429 with `Retry-After`.
    #[arg(long, env = "IDEM_MAX_WAITS_PER_KEY", default_value_t = 64)]
    pub max_waits_per_key: usize,

    /// Change streams (`GET /v1/operations/changes`) one API key may hold open at once.
    #[arg(long, env = "IDEM_MAX_STREAMS_PER_KEY", default_value_t = 8)]
    pub max_streams_per_key: usize,

    /// Change streams the server holds open at once, of agents and people together.
    #[arg(long, env = "IDEM_MAX_STREAMS", default_value_t = 1000)]
    pub max_streams: usize,

    /// How often an idle change stream sends a comment and checks that its caller's key or
    /// session is still valid (it ends when not), in milliseconds.
    #[arg(long, env = "IDEM_STREAM_KEEP_ALIVE_MS", default_value_t = 15_000,
        value_parser = clap::value_parser!(u64).range(10..))]
    pub stream_keep_alive_ms: u64,

    /// How long an API key or a tool policy read from the database is reused, in
    /// milliseconds (0: read every time). A change made through this server applies at
    /// once; one made elsewhere (another server on the same PostgreSQL, `idem keys revoke`
    /// on the same SQLite file) applies here once this much time has passed.
    #[arg(long, env = "IDEM_READ_CACHE_MS", default_value_t = 1000)]
    pub read_cache_ms: u64,

    /// Start with demo data: a sandbox provider, tools of every effect class, demo people
    /// (their passwords printed on stdout) and a simulated agent calling the API. Never for
    /// real deployments.
    #[arg(long, env = "IDEM_DEMO", value_parser = clap::builder::BoolishValueParser::new())]
    pub demo: bool,

    /// The demo agent's average pause between two actions, in milliseconds (jittered ±50 %).
    #[arg(long, env = "IDEM_DEMO_PACE_MS", default_value_t = 1500)]
    pub demo_pace_ms: u64,

    /// Log as JSON lines instead of text.
    #[arg(long, env = "IDEM_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

impl ServeConfig {
    /// A configuration for tests: port 0 on loopback, the given database.
    pub fn for_tests(database_url: impl Into<String>) -> Self {
        Self {
            bind: "127.0.0.1:0".into(),
            database: DatabaseArgs {
                database_url: database_url.into(),
            },
            public_url: None,
            site_root: PathBuf::from("target/site"),
            max_body_bytes: 1024 * 1024,
            request_timeout_secs: 75,
            lease_reaper_interval_ms: 200,
            metrics_rollup_interval_ms: 1000,
            retention_days: 30,
            reconcile_interval_ms: 200,
            approval_webhook_url: None,
            approval_webhook_retry_ms: vec![20, 20, 20, 20],
            alert_webhook_url: None,
            alert_interval_ms: 100,
            stuck_after: app::ledger::metrics::DEFAULT_STUCK_AFTER,
            alert_stuck_unknowns: 0,
            alert_approval_wait_minutes: 60,
            alert_reconcile_attempts: 3,
            session_idle: Duration::from_secs(30 * 60),
            rate_limit_per_second: 1000,
            rate_limit_burst: 2000,
            max_waits_per_key: 64,
            max_streams_per_key: 8,
            max_streams: 1000,
            stream_keep_alive_ms: 15_000,
            read_cache_ms: 1000,
            demo: false,
            demo_pace_ms: 1500,
            log_format: "text".into(),
        }
    }

    /// Whether cookies must be `Secure`.
    pub fn serves_https(&self) -> bool {
        self.public_url
            .as_deref()
            .is_some_and(|url| url.to_ascii_lowercase().starts_with("https://"))
    }
}

/// Parses the stuck threshold: a whole number of seconds, minutes or hours (`90s`, `15m`,
/// `2h`), from 1 second up to 7 days.
fn stuck_after(text: &str) -> Result<chrono::TimeDelta, String> {
    let refused =
        || format!("{text:?} is not a duration such as 90s, 15m or 2h (1 second up to 7 days)");
    let text = text.trim();
    let unit_at = text.len().checked_sub(1).ok_or_else(refused)?;
    let (number, unit) = text.split_at(unit_at);
    let seconds_per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(refused()),
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refused());
    }
    let seconds = number
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(seconds_per))
        .filter(|seconds| (1..=7 * 24 * 3600).contains(seconds))
        .ok_or_else(refused)?;
    Ok(chrono::TimeDelta::seconds(seconds))
}

/// Parses a whole number of minutes, at least one.
fn minutes(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<u64>() {
        Ok(minutes) if minutes >= 1 => Ok(Duration::from_secs(minutes * 60)),
        _ => Err(format!(
            "{text:?} is not a whole number of minutes (1 or more)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stuck_threshold_is_seconds_minutes_or_hours_up_to_a_week() {
        assert_eq!(stuck_after("15m"), Ok(chrono::TimeDelta::minutes(15)));
        assert_eq!(stuck_after("90s"), Ok(chrono::TimeDelta::seconds(90)));
        assert_eq!(stuck_after("2h"), Ok(chrono::TimeDelta::hours(2)));
        assert_eq!(stuck_after("168h"), Ok(chrono::TimeDelta::days(7)));
        for refused in [
            "", "m", "15", "0m", "-5m", "+5m", "1.5h", "15 m", "7d", "169h", "15M",
        ] {
            assert!(stuck_after(refused).is_err(), "{refused:?} is refused");
        }
    }
}
