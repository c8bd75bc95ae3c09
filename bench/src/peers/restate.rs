//! Restate, run locally for the peer comparison: `restate-server` from its npm package and the
//! trivial handler `handler.mjs`, as child processes on free loopback ports, with Restate's
//! data in a scratch folder. Dropping the peer (an error, Ctrl-C, or the end of the run) kills
//! both processes, waits for them, and only then removes the folder.

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use uuid::Uuid;

use super::ingress;

/// How long restate-server and the handler may take to start (the first start on a busy
/// machine opens 24 partitions).
const READY_WITHIN: Duration = Duration::from_secs(60);
/// What the handler prints, followed by its port, once it accepts connections.
const HANDLER_READY: &str = "restate handler listening on 127.0.0.1:";

/// Facts about the peer that the report states next to its numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RestateFacts {
    pub server_version: String,
    pub sdk_version: String,
    pub node_version: String,
    /// From spawning restate-server until its admin API and ingress both answer health checks.
    pub ready_after_ms: u64,
    /// The first idempotent call after the deployment was registered (partitions warming up).
    pub first_call_ms: u64,
    /// restate-server's resident memory once ready, and after the whole Restate run.
    pub server_rss_mib_at_rest: Option<f64>,
    pub server_rss_mib_after: Option<f64>,
    /// The handler's (node) resident memory after the run.
    pub handler_rss_mib_after: Option<f64>,
    /// Disk space of Restate's data folder after the run.
    pub data_mib_after: Option<f64>,
}

/// The three ports restate-server listens on, all on loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub ingress: u16,
    pub admin: u16,
    /// Node-to-node communication; unused by a single node, but it still binds it.
    pub fabric: u16,
}

impl Ports {
    /// Ports free right now. restate-server binds them a moment later; if another process
    /// takes one in between, the server fails to start and the bench says so.
    fn free() -> std::io::Result<Self> {
        let listeners = [(); 3].map(|()| std::net::TcpListener::bind("127.0.0.1:0"));
        let [ingress, admin, fabric] = listeners;
        Ok(Self {
            ingress: ingress?.local_addr()?.port(),
            admin: admin?.local_addr()?.port(),
            fabric: fabric?.local_addr()?.port(),
        })
    }
}

/// restate-server's configuration, given as `RESTATE_*` variables (a config key prefixed,
/// with `__` between nested sections): TCP only, so no Unix sockets are created; every
/// listener on loopback; no telemetry.
pub fn server_env(ports: Ports) -> Vec<(&'static str, String)> {
    vec![
        ("RESTATE_LISTEN_MODE", "tcp".to_owned()),
        (
            "RESTATE_BIND_ADDRESS",
            format!("127.0.0.1:{}", ports.fabric),
        ),
        (
            "RESTATE_INGRESS__BIND_ADDRESS",
            format!("127.0.0.1:{}", ports.ingress),
        ),
        (
            "RESTATE_ADMIN__BIND_ADDRESS",
            format!("127.0.0.1:{}", ports.admin),
        ),
        ("RESTATE_DISABLE_TELEMETRY", "true".to_owned()),
    ]
}

/// The npm package that holds restate-server's binary for this platform, named as
/// `@restatedev/restate-server`'s optional dependencies name them.
pub fn platform_package(os: &str, arch: &str) -> Option<String> {
    let os = match os {
        "linux" => "linux",
        "macos" => "darwin",
        _ => return None,
    };
    let arch = match arch {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        _ => return None,
    };
    Some(format!("@restatedev/restate-server-{os}-{arch}"))
}

/// The port in the handler's readiness line.
pub fn handler_port(line: &str) -> Option<u16> {
    line.trim().strip_prefix(HANDLER_READY)?.parse().ok()
}

/// `VmRSS` of a `/proc/<pid>/status` text, in MiB.
pub fn resident_mib(status: &str) -> Option<f64> {
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line
        .trim_start_matches("VmRSS:")
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib as f64 / 1024.0)
}

/// The platform binary itself, not `node_modules/.bin/restate-server`: that is a node
/// wrapper, and killing the wrapper would leave the server running.
fn server_binary(restate_dir: &Path) -> anyhow::Result<PathBuf> {
    let package = platform_package(std::env::consts::OS, std::env::consts::ARCH)
        .with_context(|| format!("Restate publishes no server for {}", std::env::consts::OS))?;
    let binary = restate_dir
        .join("node_modules")
        .join(package)
        .join("bin/restate-server");
    if !binary.is_file() {
        bail!(
            "{} is missing: run `npm ci` in {} (`make bench-peers` does)",
            binary.display(),
            restate_dir.display()
        );
    }
    Ok(binary)
}

/// A running Restate with the bench handler registered.
pub struct RestatePeer {
    /// `http://127.0.0.1:<port>` of the ingress, where services are called.
    pub ingress: String,
    admin: String,
    server: Child,
    handler: Child,
    started: Instant,
    facts: RestateFacts,
    folder: ScratchFolder,
}

impl RestatePeer {
    /// Starts the handler and restate-server, waits until both are ready, registers the
    /// handler as a deployment and makes a first call.
    pub async fn start(restate_dir: &Path) -> anyhow::Result<Self> {
        let binary = server_binary(restate_dir)?;
        let folder = ScratchFolder::create()?;
        let ports = Ports::free()?;
        let mut handler = spawn_handler(restate_dir, &folder)?;
        let handler_stdout = handler.stdout.take().context("the handler's stdout")?;
        let started = Instant::now();
        let server = spawn_server(&binary, ports, &folder)?;
        // From here on, dropping `peer` stops both processes and removes the folder.
        let mut peer = Self {
            ingress: format!("http://127.0.0.1:{}", ports.ingress),
            admin: format!("http://127.0.0.1:{}", ports.admin),
            server,
            handler,
            started,
            facts: RestateFacts::default(),
            folder,
        };
        let handler_port = wait_for_handler(handler_stdout).await?;
        peer.wait_until_ready().await?;
        peer.facts.ready_after_ms = peer.started.elapsed().as_millis() as u64;
        peer.facts.server_version = peer.server_version().await?;
        peer.facts.sdk_version = peer.register(handler_port).await?;
        peer.facts.first_call_ms = peer.first_call().await?;
        peer.facts.server_rss_mib_at_rest = peer.server_rss_mib();
        peer.facts.node_version = node_version().await.unwrap_or_default();
        Ok(peer)
    }

    fn admin_client() -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("an HTTP client")
    }

    async fn wait_until_ready(&mut self) -> anyhow::Result<()> {
        let client = Self::admin_client();
        let probes = [
            format!("{}/health", self.admin),
            format!("{}/restate/health", self.ingress),
        ];
        loop {
            if let Some(status) = self.server.try_wait()? {
                bail!(
                    "restate-server exited ({status}) before it was ready; its log ends:\n{}",
                    self.folder.log_tail("restate.log")
                );
            }
            if answers_ok(&client, &probes).await {
                return Ok(());
            }
            if self.started.elapsed() > READY_WITHIN {
                bail!(
                    "restate-server was not ready within {READY_WITHIN:?}; its log ends:\n{}",
                    self.folder.log_tail("restate.log")
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn server_version(&self) -> anyhow::Result<String> {
        let version: Value = Self::admin_client()
            .get(format!("{}/version", self.admin))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(version["version"].as_str().unwrap_or("unknown").to_owned())
    }

    /// Registers the handler (`POST /deployments`); returns the SDK version Restate found.
    async fn register(&self, handler_port: u16) -> anyhow::Result<String> {
        let response = Self::admin_client()
            .post(format!("{}/deployments", self.admin))
            .json(&json!({ "uri": format!("http://127.0.0.1:{handler_port}") }))
            .send()
            .await?;
        let status = response.status();
        let body = response.text().await?;
        if !status.is_success() {
            bail!("registering the handler: {status}: {body}");
        }
        let deployment: Value = serde_json::from_str(&body)?;
        Ok(deployment["sdk_version"]
            .as_str()
            .unwrap_or("unknown")
            .to_owned())
    }

    /// The first call waits for the partitions to elect their leaders; it is timed, then
    /// kept out of the measured runs.
    async fn first_call(&self) -> anyhow::Result<u64> {
        let client = ingress::client(&self.ingress)?;
        let key = format!("warm-up-{}", Uuid::new_v4().simple());
        let begun = Instant::now();
        let answer = tokio::time::timeout(READY_WITHIN, ingress::call(&client, &key))
            .await
            .context("the first call got no answer in time")??;
        if answer.status != 200 {
            bail!(
                "the first call answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        Ok(begun.elapsed().as_millis() as u64)
    }

    fn server_rss_mib(&self) -> Option<f64> {
        rss_mib_of(self.server.id()?)
    }

    /// Stops the processes and removes the data, returning what was learned about the peer.
    pub fn stop(mut self) -> RestateFacts {
        self.facts.server_rss_mib_after = self.server_rss_mib();
        self.facts.handler_rss_mib_after = self.handler.id().and_then(rss_mib_of);
        self.facts.data_mib_after = self.folder.disk_mib("data");
        self.facts.clone()
    }
}

impl Drop for RestatePeer {
    fn drop(&mut self) {
        // kill_on_drop would kill them too, but without waiting: the folder must outlive them.
        let _ = self.server.start_kill();
        let _ = self.handler.start_kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        for child in [&mut self.server, &mut self.handler] {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

async fn answers_ok(client: &reqwest::Client, urls: &[String]) -> bool {
    for url in urls {
        match client.get(url).send().await {
            Ok(response) if response.status().is_success() => {}
            _ => return false,
        }
    }
    true
}

fn rss_mib_of(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    resident_mib(&status)
}

fn spawn_handler(restate_dir: &Path, folder: &ScratchFolder) -> anyhow::Result<Child> {
    Command::new("node")
        .arg("handler.mjs")
        .arg("0")
        .current_dir(restate_dir)
        // The SDK logs every invocation at INFO; that would measure the console.
        .env("RESTATE_LOGGING", "WARN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(folder.log_file("handler.log")?)
        .kill_on_drop(true)
        .spawn()
        .context("starting `node handler.mjs` (is Node.js installed?)")
}

fn spawn_server(binary: &Path, ports: Ports, folder: &ScratchFolder) -> anyhow::Result<Child> {
    let log = folder.log_file("restate.log")?;
    Command::new(binary)
        .arg("--base-dir")
        .arg(folder.path.join("data"))
        .args(["--no-logo", "--log-format", "compact"])
        .args(["--log-disable-ansi-codes", "true"])
        .envs(server_env(ports))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

/// Reads the handler's output until it says which port it listens on, then keeps draining it
/// so the handler never blocks on a full pipe.
async fn wait_for_handler(stdout: ChildStdout) -> anyhow::Result<u16> {
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(READY_WITHIN, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(port) = handler_port(&line) {
                return Ok(port);
            }
        }
        bail!("the handler exited before it listened (see its log)")
    })
    .await
    .context("the handler did not start listening in time")??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(port)
}

async fn node_version() -> anyhow::Result<String> {
    let output = Command::new("node").arg("--version").output().await?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// A folder under the system's temp folder, removed when dropped.
struct ScratchFolder {
    path: PathBuf,
}

impl ScratchFolder {
    fn create() -> std::io::Result<Self> {
        let name = format!("idem-bench-restate-{}", Uuid::new_v4().simple());
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    fn log_file(&self, name: &str) -> std::io::Result<std::fs::File> {
        std::fs::File::create(self.path.join(name))
    }

    /// The last lines of a log, to say why a process failed.
    fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.path.join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn disk_mib(&self, name: &str) -> Option<f64> {
        disk_bytes(&self.path.join(name)).map(|bytes| bytes as f64 / (1024.0 * 1024.0))
    }
}

impl Drop for ScratchFolder {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.path) {
            eprintln!("could not remove {}: {error}", self.path.display());
        }
    }
}

/// Space a folder takes on disk (allocated blocks, so preallocated files count in full).
#[cfg(unix)]
fn disk_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if !metadata.is_dir() {
        return Some(metadata.blocks() * 512);
    }
    let entries = std::fs::read_dir(path).ok()?;
    Some(
        entries
            .filter_map(Result::ok)
            .filter_map(|entry| disk_bytes(&entry.path()))
            .sum(),
    )
}

#[cfg(not(unix))]
fn disk_bytes(_path: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_comes_from_the_package_for_this_platform() {
        let cases = [
            (
                "linux",
                "x86_64",
                Some("@restatedev/restate-server-linux-x64"),
            ),
            (
                "linux",
                "aarch64",
                Some("@restatedev/restate-server-linux-arm64"),
            ),
            (
                "macos",
                "aarch64",
                Some("@restatedev/restate-server-darwin-arm64"),
            ),
            (
                "macos",
                "x86_64",
                Some("@restatedev/restate-server-darwin-x64"),
            ),
            ("windows", "x86_64", None),
            ("linux", "riscv64", None),
        ];
        for (os, arch, package) in cases {
            assert_eq!(
                platform_package(os, arch).as_deref(),
                package,
                "{os} {arch}"
            );
        }
    }

    #[test]
    fn the_handler_is_ready_when_it_names_its_port() {
        let cases = [
            ("restate handler listening on 127.0.0.1:40215", Some(40215)),
            (
                "restate handler listening on 127.0.0.1:9080\r\n",
                Some(9080),
            ),
            ("restate handler listening on 0.0.0.0:9080", None),
            ("restate handler listening on 127.0.0.1:", None),
            ("restate handler listening on 127.0.0.1:70000", None),
            (
                "[restate] WARN: Accepting requests without validating",
                None,
            ),
        ];
        for (line, port) in cases {
            assert_eq!(handler_port(line), port, "{line:?}");
        }
    }

    #[test]
    fn the_server_listens_on_loopback_only_on_the_given_ports() {
        let ports = Ports {
            ingress: 18080,
            admin: 19070,
            fabric: 15122,
        };
        let env = server_env(ports);
        let value = |name: &str| {
            env.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.as_str())
        };
        assert_eq!(
            value("RESTATE_INGRESS__BIND_ADDRESS"),
            Some("127.0.0.1:18080")
        );
        assert_eq!(
            value("RESTATE_ADMIN__BIND_ADDRESS"),
            Some("127.0.0.1:19070")
        );
        assert_eq!(value("RESTATE_BIND_ADDRESS"), Some("127.0.0.1:15122"));
        assert_eq!(value("RESTATE_LISTEN_MODE"), Some("tcp"));
        assert_eq!(value("RESTATE_DISABLE_TELEMETRY"), Some("true"));
    }

    #[test]
    fn free_ports_are_three_different_ports() {
        let ports = Ports::free().expect("free ports");
        assert_ne!(ports.ingress, ports.admin);
        assert_ne!(ports.admin, ports.fabric);
        assert_ne!(ports.ingress, ports.fabric);
    }

    #[test]
    fn resident_memory_is_read_from_proc_status() {
        let status =
            "Name:\trestate-server\nVmPeak:\t 900000 kB\nVmRSS:\t  275984 kB\nThreads:\t40\n";
        assert_eq!(resident_mib(status), Some(275984.0 / 1024.0));
        assert_eq!(resident_mib("Name:\tzombie\n"), None);
        assert_eq!(resident_mib("VmRSS:\tlots\n"), None);
    }

    #[test]
    fn a_folder_without_node_modules_says_how_to_install_them() {
        let empty = ScratchFolder::create().expect("a scratch folder");
        let error = server_binary(&empty.path).unwrap_err().to_string();
        assert!(error.contains("is missing: run `npm ci` in"), "{error}");
    }

    #[test]
    fn a_scratch_folder_is_gone_once_dropped() {
        let folder = ScratchFolder::create().expect("a scratch folder");
        let path = folder.path.clone();
        std::fs::create_dir_all(path.join("data/node")).unwrap();
        std::fs::write(path.join("data/node/file"), vec![1u8; 10_000]).unwrap();
        assert!(folder.disk_mib("data").is_some_and(|mib| mib > 0.0));
        drop(folder);
        assert!(!path.exists());
    }
}
