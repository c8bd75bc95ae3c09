//! The real server, `idem serve`, as a child process of the bench (so its memory is its own),
//! with a person signed in for the pages and an API key for the REST reads.

use anyhow::{bail, Context};
use reqwest::header::{HeaderValue, COOKIE, SET_COOKIE};
use serde_json::json;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// How long the server may take to answer `/healthz` after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `idem serve`, killed when dropped.
pub struct ChildServer {
    child: Child,
    pub base: String,
    log: PathBuf,
}

/// A free loopback port: bound, read, released (the server binds it right after).
fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl ChildServer {
    /// Starts `idem serve` (the binary `idem_bin`) on the database with its defaults (except
    /// a free port), its output in a log file, and waits until it answers.
    pub async fn start(idem_bin: &std::path::Path, database_url: &str) -> anyhow::Result<Self> {
        Self::start_with(idem_bin, database_url, &[]).await
    }

    /// As [`ChildServer::start`], with more options of `idem serve`.
    pub async fn start_with(
        idem_bin: &std::path::Path,
        database_url: &str,
        options: &[&str],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let log = std::env::temp_dir().join(format!("idem-bench-serve-{port}.log"));
        let output =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(idem_bin)
            .arg("serve")
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .args(["--database-url", database_url])
            .args(options)
            .stdin(Stdio::null())
            .stdout(output.try_clone()?)
            .stderr(output)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {} serve", idem_bin.display()))?;
        let mut server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        server.wait_until_ready().await?;
        Ok(server)
    }

    async fn wait_until_ready(&mut self) -> anyhow::Result<()> {
        let client = reqwest::Client::new();
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if let Some(status) = self.child.try_wait()? {
                bail!("idem serve exited ({status}): {}", self.log_tail());
            }
            let health = client.get(format!("{}/healthz", self.base)).send().await;
            if health.is_ok_and(|answer| answer.status().is_success()) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "idem serve did not answer within {START_TIMEOUT:?}: {}",
            self.log_tail()
        )
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let start = text.len().saturating_sub(2000);
        text.get(start..).unwrap_or_default().to_owned()
    }

    /// The server's resident memory in MB (`VmRSS` of `/proc/PID/status`), where Linux says.
    pub fn rss_mb(&self) -> Option<f64> {
        let pid = self.child.id()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        parse_vm_rss_kb(&status).map(|kb| kb as f64 / 1024.0)
    }

    /// Signs `username` in and returns the session cookie to send (`idem_session=…`).
    pub async fn sign_in(&self, username: &str, password: &str) -> anyhow::Result<HeaderValue> {
        let answer = reqwest::Client::new()
            .post(format!("{}/auth/login", self.base))
            .json(&json!({ "username": username, "password": password }))
            .send()
            .await?;
        if !answer.status().is_success() {
            bail!("signing in answered {}", answer.status());
        }
        let cookie = answer
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(|value| {
                value
                    .split(';')
                    .next()
                    .filter(|c| c.starts_with("idem_session="))
            })
            .context("no idem_session cookie in the sign-in answer")?;
        Ok(HeaderValue::from_str(cookie)?)
    }

    /// Stops the server (it holds nothing the bench needs afterwards).
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A client sending the session cookie with every request.
pub fn person_client(cookie: HeaderValue) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(COOKIE, cookie);
    reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .expect("an HTTP client")
}

/// `VmRSS:   123456 kB` → 123456.
pub fn parse_vm_rss_kb(status: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix("VmRSS:")?;
        value.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_read_from_the_vm_rss_line() {
        let status = "Name:\tidem\nVmPeak:\t  900000 kB\nVmRSS:\t   48212 kB\nThreads:\t5\n";
        assert_eq!(parse_vm_rss_kb(status), Some(48_212));
        assert_eq!(parse_vm_rss_kb("Name:\tkernel-thread\n"), None);
    }
}
