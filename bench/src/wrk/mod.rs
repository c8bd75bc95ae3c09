//! The external load generator: `wrk` (Debian's package) driving idem or Restate over HTTP
//! with the Lua script `load.lua`, so both peers are measured by the same client that is not
//! the bench's own. The script prints one line of JSON when wrk is done; it is parsed here.

#[cfg(test)]
mod tests;

use anyhow::{bail, Context};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Command;
use uuid::Uuid;

use crate::report::RunResult;

/// The script, written to a scratch file for each run of the bench.
const SCRIPT: &str = include_str!("load.lua");
/// The marker before the script's summary line.
const MARKER: &str = "IDEM_BENCH ";
/// An answer slower than this is a timeout (wrk's default is 2 s; idem at 64 connections on
/// PostgreSQL can take longer under a busy machine, and a timeout would hide it).
const TIMEOUT: &str = "10s";

/// What one wrk run sends; each kind mirrors a step of the bench's own client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// idem: claim a new key (201), then complete it (200); a step is the completion.
    IdemNew,
    /// idem: claim a completed key (200).
    IdemReplay,
    /// Restate: one call with a new `idempotency-key` (200).
    RestateNew,
    /// Restate: one call with a completed call's key (200 with `idempotency-expires`).
    RestateReplay,
}

impl Load {
    /// The name `load.lua` knows it by.
    pub fn script_name(self) -> &'static str {
        match self {
            Load::IdemNew => "idem-new",
            Load::IdemReplay => "idem-replay",
            Load::RestateNew => "restate-new",
            Load::RestateReplay => "restate-replay",
        }
    }
}

/// Where and what one run sends.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub load: Load,
    /// Keys are `<prefix>-w<thread>-<n>` when new, `<prefix>-done-<i>` when repeated.
    pub prefix: String,
    /// The `Authorization` header's value (idem's `Bearer …`), if any.
    pub authorization: Option<String>,
    /// How many completed keys (`<prefix>-done-0` …) a repeated-key load cycles through.
    pub completed_keys: usize,
}

impl Target {
    /// A target of new keys, under a prefix no earlier run used.
    pub fn new_keys(base: &str, load: Load, authorization: Option<String>) -> Self {
        Self {
            base: base.to_owned(),
            load,
            prefix: Uuid::new_v4().simple().to_string(),
            authorization,
            completed_keys: 1,
        }
    }
}

/// The script's summary of one run, as it prints it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Summary {
    pub duration_us: u64,
    /// Every answer wrk read, whatever its status.
    pub requests: u64,
    /// Steps that ended as the load expects.
    pub ok: u64,
    /// Answers with another status (or without the expected header or body).
    pub unexpected: u64,
    pub first_unexpected: String,
    pub connect_errors: u64,
    pub read_errors: u64,
    pub write_errors: u64,
    pub timeouts: u64,
    /// Per request, not per step: an idem new key's step is two requests.
    pub p50_us: u64,
    pub p99_us: u64,
}

impl Summary {
    /// Finds the summary line in wrk's output.
    pub fn parse(stdout: &str) -> anyhow::Result<Summary> {
        let line = stdout
            .lines()
            .find_map(|line| line.strip_prefix(MARKER))
            .context("wrk printed no summary line (did the script run?)")?;
        serde_json::from_str(line).with_context(|| format!("wrk's summary line: {line}"))
    }

    /// Answers that were not what the load expects, and requests that got no answer.
    pub fn errors(&self) -> u64 {
        self.unexpected + self.connect_errors + self.read_errors + self.write_errors + self.timeouts
    }

    /// The run as a row of the report: steps per second, latencies per request.
    pub fn run_result(&self) -> RunResult {
        let seconds = self.duration_us as f64 / 1e6;
        RunResult {
            throughput: if seconds > 0.0 {
                self.ok as f64 / seconds
            } else {
                0.0
            },
            p50_ms: self.p50_us as f64 / 1000.0,
            p99_ms: self.p99_us as f64 / 1000.0,
            errors: self.errors(),
        }
    }
}

/// wrk's threads for a number of connections: each thread gets connections / threads and
/// the rest are dropped, so the count must divide them; no more than the cores.
pub fn threads_for(connections: usize, cores: usize) -> usize {
    (1..=cores.max(1))
        .rev()
        .find(|threads| connections.is_multiple_of(*threads))
        .unwrap_or(1)
}

/// The arguments of one wrk run.
pub fn arguments(
    target: &Target,
    script: &Path,
    connections: usize,
    cores: usize,
    duration: Duration,
) -> Vec<String> {
    vec![
        format!("--threads={}", threads_for(connections, cores)),
        format!("--connections={connections}"),
        format!("--duration={}s", duration.as_secs().max(1)),
        format!("--timeout={TIMEOUT}"),
        format!("--script={}", script.display()),
        target.base.clone(),
        "--".into(),
        target.load.script_name().into(),
        target.prefix.clone(),
        target.authorization.clone().unwrap_or_else(|| "-".into()),
        target.completed_keys.max(1).to_string(),
    ]
}

/// wrk, found on PATH, with its script written out.
pub struct Wrk {
    binary: PathBuf,
    script: ScriptFile,
    cores: usize,
}

impl Wrk {
    /// wrk on PATH, or why not.
    pub fn find() -> anyhow::Result<Self> {
        let binary = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|folder| folder.join("wrk"))
            .find(|path| path.is_file())
            .context("wrk is not installed (`apt-get install wrk`; `make bench-peers` does)")?;
        Ok(Self {
            binary,
            script: ScriptFile::write()?,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        })
    }

    /// Runs wrk against the target with `connections` for `duration`.
    pub async fn run(
        &self,
        target: &Target,
        connections: usize,
        duration: Duration,
    ) -> anyhow::Result<Summary> {
        let output = Command::new(&self.binary)
            .args(arguments(
                target,
                &self.script.path,
                connections,
                self.cores,
                duration,
            ))
            .kill_on_drop(true)
            .output()
            .await
            .context("running wrk")?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            bail!(
                "wrk exited ({}): {}{}",
                output.status,
                stdout,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Summary::parse(&stdout)
    }
}

/// `load.lua` in the temp folder, removed when dropped.
struct ScriptFile {
    path: PathBuf,
}

impl ScriptFile {
    fn write() -> anyhow::Result<Self> {
        let name = format!("idem-bench-wrk-{}.lua", Uuid::new_v4().simple());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, SCRIPT).with_context(|| format!("writing {}", path.display()))?;
        Ok(Self { path })
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
