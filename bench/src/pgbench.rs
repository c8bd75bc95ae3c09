//! The PostgreSQL floor of issue #7: `pgbench` running idem's claim (the operation row and its
//! event, one transaction) and completion (the guarded update and its event, a second one)
//! as plain SQL, with none of idem's reads, so it is the most a client could commit.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::report::RunResult;

/// One pgbench "transaction" is one pass through this script: a claim + complete pair, in two
/// database transactions, the same writes as idem's store (`src/storage/ledger_sql.rs`).
/// The id is time-ordered like idem's UUIDv7 (PostgreSQL 15 has no `uuidv7()`), so inserts
/// land at the end of the primary key as idem's do. Statements are prepared (`-M prepared`),
/// which also lets `:op_id` be sent as a parameter. pgbench reads `:name` as a variable even
/// inside quotes, so no literal here has a colon before a letter.
pub const SCRIPT: &str = r#"\set k random(1, 9223372036854775806)
begin;
insert into operations (id, namespace, key, key_source, tool, effect, fingerprint,
                        provider_key, args, status, attempt, lease_token, lease_expires_at,
                        created_at, updated_at, expires_at, runner)
values ((lpad(to_hex(cast(extract(epoch from clock_timestamp()) * 1000 as bigint)), 12, '0')
         || '7' || substr(md5(cast(:k as text)), 1, 19))::uuid,
        'pgbench', 'pgbench-' || :k, 'body', 'bench.charge', 'non_idempotent_write',
        'b5f3c0e0a1d94e7c8f2a6b1c3d5e7f90b5f3c0e0a1d94e7c8f2a6b1c3d5e7f90',
        'idem_pgbench-' || :k, '{"amount_cents": 500}', 'pending', 1,
        md5(cast(:k as text)) || md5('lease' || cast(:k as text)),
        now() + interval '30 seconds', now(), now(), now() + interval '1 day', 'agent')
returning id as op_id \gset
insert into operation_events (operation_id, at, kind, actor, detail)
values (:op_id, now(), 'claimed', 'agent/bench-pgbench',
        '{"attempt": 1, "key_source": "body", "effect": "non_idempotent_write"}');
commit;
begin;
update operations set status = 'succeeded', result = '{"ok": true}', lease_token = null,
       lease_expires_at = null, updated_at = now(), completed_at = now()
 where id = :op_id and status = 'pending';
insert into operation_events (operation_id, at, kind, actor, detail)
values (:op_id, now(), 'completed', 'agent/bench-pgbench',
        '{"status": "succeeded", "retryable": false, "provider_ref": null, "attempt": 1}');
commit;
"#;

/// Why pgbench gave no figure.
#[derive(Debug, thiserror::Error)]
pub enum PgbenchError {
    #[error("writing the script: {0}")]
    Script(std::io::Error),
    #[error("running {0}: {1}")]
    Spawn(PathBuf, std::io::Error),
    #[error("pgbench failed ({status}): {stderr}")]
    Failed { status: String, stderr: String },
    #[error("no `tps = …` line in pgbench's output: {0}")]
    NoTps(String),
}

/// pgbench on `PATH`, else the newest one Debian installs under `/usr/lib/postgresql/*/bin`.
pub fn find() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("pgbench"))
            .find(|candidate| candidate.is_file())
    });
    on_path.or_else(newest_debian_pgbench)
}

fn newest_debian_pgbench() -> Option<PathBuf> {
    let versions = std::fs::read_dir("/usr/lib/postgresql").ok()?;
    versions
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let pgbench = entry.path().join("bin/pgbench");
            pgbench.is_file().then_some((version, pgbench))
        })
        .max_by_key(|(version, _)| *version)
        .map(|(_, pgbench)| pgbench)
}

/// What pgbench printed that the bench uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PgbenchSummary {
    /// Script passes (claim + complete pairs) per second.
    pub tps: f64,
    /// The mean latency of a pass, when printed.
    pub latency_average_ms: Option<f64>,
    /// Failed passes, when printed (PostgreSQL 15 and later).
    pub failed: u64,
}

/// Reads pgbench's summary: `tps = 3901.2 (without initial connection time)`,
/// `latency average = 8.2 ms` and `number of failed transactions: 0 (0.000%)`.
pub fn parse_summary(output: &str) -> Option<PgbenchSummary> {
    let value_after = |prefix: &str| {
        output.lines().find_map(|line| {
            let rest = line.trim().strip_prefix(prefix)?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
    };
    Some(PgbenchSummary {
        tps: value_after("tps = ")?,
        latency_average_ms: value_after("latency average = "),
        failed: value_after("number of failed transactions: ").map_or(0, |n| n as u64),
    })
}

/// Runs the script at `clients` connections for `duration` against `database_url` (a libpq
/// URI is accepted where a database name is).
pub async fn run(
    pgbench: &Path,
    script: &Path,
    database_url: &str,
    clients: usize,
    duration: Duration,
) -> Result<RunResult, PgbenchError> {
    let threads = clients.min(std::thread::available_parallelism().map_or(1, |n| n.get()));
    let output = tokio::process::Command::new(pgbench)
        .args(["--no-vacuum", "--protocol=prepared"])
        .arg(format!("--client={clients}"))
        .arg(format!("--jobs={threads}"))
        .arg(format!("--time={}", duration.as_secs().max(1)))
        .arg("--file")
        .arg(script)
        .arg(database_url)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|error| PgbenchError::Spawn(pgbench.to_owned(), error))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(PgbenchError::Failed {
            status: output.status.to_string(),
            stderr: stderr.chars().take(600).collect(),
        });
    }
    let summary = parse_summary(&stdout).ok_or_else(|| PgbenchError::NoTps(stdout.to_string()))?;
    Ok(RunResult {
        throughput: summary.tps,
        // pgbench prints a mean, not percentiles: the p50 column shows the mean, p99 none.
        p50_ms: summary.latency_average_ms.unwrap_or(f64::NAN),
        p99_ms: f64::NAN,
        errors: summary.failed,
    })
}

/// Turns idem's change stream trigger (`operations_announce`, which notifies inside the
/// transactions that replace a final outcome) on or off on the database at `database_url`, which no idem uses yet.
pub async fn announce_changes(database_url: &str, on: bool) -> Result<(), String> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(database_url)
        .await
        .map_err(|e| format!("connecting to switch the change trigger: {e}"))?;
    let switch = if on { "enable" } else { "disable" };
    let sql = format!("alter table operations {switch} trigger operations_announce");
    sqlx::query(&sql)
        .execute(&mut conn)
        .await
        .map_err(|e| format!("{sql}: {e}"))?;
    Ok(())
}

/// The script in a file of the temp folder, removed when dropped.
pub struct ScriptFile(PathBuf);

impl ScriptFile {
    /// Writes the script where pgbench can read it.
    pub fn write() -> Result<Self, PgbenchError> {
        let name = format!("idem-bench-{}-claim-complete.sql", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, SCRIPT).map_err(PgbenchError::Script)?;
        Ok(Self(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PG15_OUTPUT: &str = "\
transaction type: claim-complete.pgbench.sql
scaling factor: 1
query mode: prepared
number of clients: 32
number of threads: 2
maximum number of tries: 1
duration: 5 s
number of transactions actually processed: 19506
number of failed transactions: 3 (0.015%)
latency average = 8.196 ms
initial connection time = 41.372 ms
tps = 3904.337012 (without initial connection time)
";

    #[test]
    fn the_summary_gives_tps_mean_latency_and_failures() {
        let summary = parse_summary(PG15_OUTPUT).expect("a summary");
        assert_eq!(summary.tps, 3904.337012);
        assert_eq!(summary.latency_average_ms, Some(8.196));
        assert_eq!(summary.failed, 3);
    }

    #[test]
    fn older_outputs_without_failures_or_latency_still_give_tps() {
        let older = "number of clients: 1\ntps = 512.5 (including connections establishing)\n\
                     tps = 520.1 (excluding connections establishing)\n";
        let summary = parse_summary(older).expect("a summary");
        assert_eq!(summary.tps, 512.5);
        assert_eq!(summary.latency_average_ms, None);
        assert_eq!(summary.failed, 0);
    }

    #[test]
    fn an_output_without_tps_is_no_summary() {
        assert_eq!(parse_summary("pgbench: error: connection failed\n"), None);
    }

    #[test]
    fn the_script_claims_and_completes_in_two_transactions() {
        let statements: Vec<&str> = SCRIPT
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let begins = statements.iter().filter(|s| s.ends_with("begin")).count();
        let commits = statements.iter().filter(|s| *s == &"commit").count();
        assert_eq!((begins, commits), (2, 2));
        assert!(SCRIPT.contains("'claimed'") && SCRIPT.contains("'completed'"));
        assert!(SCRIPT.contains("where id = :op_id and status = 'pending'"));
    }

    #[test]
    fn every_colon_name_in_the_script_is_a_variable_it_sets() {
        // pgbench substitutes `:name` even inside quotes (but not `::type`), so a stray one
        // breaks the statement.
        let without_casts = SCRIPT.replace("::", "  ");
        let names: Vec<&str> = without_casts
            .split(':')
            .skip(1)
            .map(|rest| {
                rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
                    .unwrap_or("")
            })
            .filter(|name| name.starts_with(|c: char| c.is_alphabetic()))
            .collect();
        assert!(!names.is_empty());
        assert!(
            names.iter().all(|name| ["k", "op_id"].contains(name)),
            "{names:?}"
        );
    }
}
