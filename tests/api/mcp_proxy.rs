//! `idem mcp-proxy` as a host sees it: rmcp's client drives the real proxy process over stdio,
//! the proxy starts the sandbox MCP server (`idem sandbox-mcp`, written with rmcp) as its
//! upstream, and a real idem server keeps the ledger. The sandbox appends each effect to a
//! file, so the tests count what really happened.

use app::domain::Role;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, RequestMetaObject};
use rmcp::service::{RoleClient, RunningService, Service};
use rmcp::transport::TokioChildProcess;
use rmcp::ServiceExt;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Stdio;
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, Command};

use crate::helpers::{Client, Db, TestApp};
use crate::on_both_databases;

on_both_databases!(
    the_same_call_twice_acts_once_and_says_so,
    concurrent_duplicates_act_once,
    an_irreversible_tool_acts_once_after_approval,
    a_rejection_tells_the_model_who_and_why,
    a_tool_error_is_stored_as_a_permanent_failure,
    meta_keys_make_two_proxies_act_once,
);

mod sqlite_only {
    #[tokio::test]
    async fn a_hanging_upstream_leaves_the_outcome_unknown() {
        super::a_hanging_upstream_leaves_the_outcome_unknown(super::Db::Sqlite).await;
    }
    #[tokio::test]
    async fn import_registers_new_tools_by_annotation_and_keeps_registered_ones() {
        super::import_registers_new_tools(super::Db::Sqlite).await;
    }
    #[tokio::test]
    async fn the_proxy_warns_about_unregistered_tools() {
        super::the_proxy_warns_about_unregistered_tools(super::Db::Sqlite).await;
    }
}

pub(crate) type Host = RunningService<RoleClient, ()>;

/// A real idem, an agent's key, and the file the sandbox's effects go to.
pub(crate) struct Setup {
    pub(crate) app: TestApp,
    pub(crate) key: String,
    pub(crate) effects: PathBuf,
}

impl Setup {
    pub(crate) async fn new(db: Db) -> Self {
        let app = TestApp::spawn(db).await;
        let key = app.api_key("assistant").await;
        let effects =
            std::env::temp_dir().join(format!("idem-mcp-{}.effects", uuid::Uuid::new_v4()));
        Self { app, key, effects }
    }

    fn sandbox_command(&self) -> Vec<String> {
        let idem = env!("CARGO_BIN_EXE_idem").to_owned();
        let effects = self.effects.to_string_lossy().into_owned();
        vec![idem, "sandbox-mcp".into(), "--effects-file".into(), effects]
    }

    /// `idem mcp-proxy … -- idem sandbox-mcp …`, connected as a host would.
    async fn proxy(&self, extra: &[&str]) -> Host {
        self.proxy_for((), extra, Stdio::null()).await.0
    }

    /// The same, with `handler` taking what the proxy sends of its own accord.
    pub(crate) async fn proxy_for<H: Service<RoleClient>>(
        &self,
        handler: H,
        extra: &[&str],
        stderr: Stdio,
    ) -> (RunningService<RoleClient, H>, Option<ChildStderr>) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_idem"));
        command
            .args(["mcp-proxy", "--idem-url", &self.app.address])
            .args(["--api-key", &self.key])
            .args(extra)
            .arg("--")
            .args(self.sandbox_command());
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(stderr)
            .spawn()
            .unwrap();
        let host = handler
            .serve(transport)
            .await
            .expect("the proxy speaks MCP");
        (host, stderr)
    }

    /// How many times the sandbox performed `tool`.
    pub(crate) fn effects_of(&self, tool: &str) -> usize {
        let lines = std::fs::read_to_string(&self.effects).unwrap_or_default();
        let prefix = format!("{tool} ");
        lines.lines().filter(|l| l.starts_with(&prefix)).count()
    }

    async fn register(&self, tool: &str, effect: &str) {
        let admin = self.app.person(Role::Admin).await;
        let response = admin.put_tool(tool, &json!({ "effect": effect })).await;
        assert_eq!(response.status(), 200);
    }

    /// An approver approves or rejects the one operation of `tool`.
    async fn decide(&self, tool: &str, verdict: &str, reason: &str) {
        let id = self.operation(tool).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let approver = self.app.person(Role::Approver).await;
        let path = format!("/v1/operations/{id}/{verdict}");
        let decided = approver
            .post_json(&path, &json!({ "reason": reason }))
            .await;
        assert_eq!(decided.status(), 200);
    }

    /// The one operation of `tool`, as idem stores it.
    pub(crate) async fn operation(&self, tool: &str) -> Value {
        let agent = self.app.agent_with_key(&self.key);
        let list: Value = agent
            .get(&format!("/v1/operations?tool={tool}"))
            .await
            .json()
            .await
            .unwrap();
        let operations = list["operations"].as_array().unwrap();
        assert_eq!(operations.len(), 1, "{list}");
        operations[0].clone()
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.effects);
    }
}

pub(crate) async fn call<H: Service<RoleClient>>(
    host: &RunningService<RoleClient, H>,
    tool: &str,
    args: Value,
    meta: Option<Value>,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    if let Some(meta) = meta {
        let meta: JsonObject = meta.as_object().cloned().unwrap();
        params.meta = Some(RequestMetaObject::from(meta));
    }
    host.peer().call_tool(params).await.expect("a tool result")
}

/// Every text of a result, one after another.
pub(crate) fn text(result: &CallToolResult) -> String {
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    texts.join("\n")
}

async fn the_same_call_twice_acts_once_and_says_so(db: Db) {
    let setup = Setup::new(db).await;
    let host = setup.proxy(&[]).await;
    let tools = host.peer().list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "send_email"),
        "tools listed unchanged"
    );

    let args = json!({ "to": "ann@example.com", "body": "your refund" });
    acts_once_and_says_so(&setup, &host, args).await;
}

/// Calls `send_email` twice with `args`: one effect, and the second answer is the note and
/// the stored result.
async fn acts_once_and_says_so(setup: &Setup, host: &Host, args: Value) {
    let first = call(host, "send_email", args.clone(), None).await;
    assert_eq!(first.is_error, Some(false), "{first:?}");
    let again = call(host, "send_email", args, None).await;

    assert_eq!(setup.effects_of("send_email"), 1);
    let said = text(&again);
    assert!(said.starts_with("already completed"), "{said}");
    assert!(
        said.contains("send_email done with"),
        "the stored result follows: {said}"
    );
    assert_eq!(setup.operation("send_email").await["status"], "succeeded");
}

async fn concurrent_duplicates_act_once(db: Db) {
    let setup = Setup::new(db).await;
    let host = setup.proxy(&[]).await;
    let args = json!({ "to": "bob@example.com" });
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let (peer, args) = (host.peer().clone(), args.clone());
        let params = CallToolRequestParams::new("send_email")
            .with_arguments(args.as_object().cloned().unwrap());
        calls.spawn(async move { peer.call_tool(params).await.unwrap() });
    }
    let results = calls.join_all().await;

    assert_eq!(setup.effects_of("send_email"), 1);
    let acted = results
        .iter()
        .filter(|r| !text(r).starts_with("already"))
        .count();
    let said: Vec<String> = results.iter().map(text).collect();
    assert!(acted >= 1, "{said:?}");
}

async fn an_irreversible_tool_acts_once_after_approval(db: Db) {
    let setup = Setup::new(db).await;
    setup.register("wire_transfer", "irreversible").await;
    let host = setup.proxy(&[]).await;
    let args = json!({ "amount_cents": 100_000, "to": "DE89" });

    let asked = call(&host, "wire_transfer", args.clone(), None).await;
    assert!(
        text(&asked).contains("needs a person's approval"),
        "{asked:?}"
    );
    assert_eq!(
        setup.effects_of("wire_transfer"),
        0,
        "nothing done before approval"
    );

    setup
        .decide("wire_transfer", "approve", "expected payout")
        .await;

    let done = call(&host, "wire_transfer", args.clone(), None).await;
    assert!(text(&done).starts_with("wire_transfer done"), "{done:?}");
    let replayed = call(&host, "wire_transfer", args, None).await;
    assert!(
        text(&replayed).starts_with("already completed"),
        "{replayed:?}"
    );
    assert_eq!(setup.effects_of("wire_transfer"), 1);
}

async fn a_rejection_tells_the_model_who_and_why(db: Db) {
    let setup = Setup::new(db).await;
    setup.register("wire_transfer", "irreversible").await;
    let host = setup.proxy(&[]).await;
    let args = json!({ "amount_cents": 5, "to": "XX00" });
    call(&host, "wire_transfer", args.clone(), None).await;

    setup
        .decide("wire_transfer", "reject", "unknown beneficiary")
        .await;
    let who = setup.operation("wire_transfer").await["approval"]["decided_by"]
        .as_str()
        .unwrap()
        .to_owned();

    let told = call(&host, "wire_transfer", args, None).await;
    let said = text(&told);
    assert_eq!(told.is_error, Some(true));
    assert!(
        said.contains(&who) && said.contains("unknown beneficiary"),
        "{said}"
    );
    assert_eq!(setup.effects_of("wire_transfer"), 0);
}

async fn a_tool_error_is_stored_as_a_permanent_failure(db: Db) {
    let setup = Setup::new(db).await;
    let host = setup.proxy(&[]).await;
    let first = call(&host, "charge_declined", json!({ "cents": 10 }), None).await;
    assert_eq!(
        (first.is_error, text(&first).as_str()),
        (Some(true), "card_declined")
    );

    let operation = setup.operation("charge_declined").await;
    assert_eq!(operation["status"], "failed");
    assert_eq!(operation["retryable"], false);
    let again = call(&host, "charge_declined", json!({ "cents": 10 }), None).await;
    assert_eq!(again.is_error, Some(true));
    assert!(text(&again).starts_with("already completed"), "{again:?}");
    assert!(text(&again).ends_with("card_declined"), "{again:?}");
    assert_eq!(setup.effects_of("charge_declined"), 1);
}

async fn meta_keys_make_two_proxies_act_once(db: Db) {
    let setup = Setup::new(db).await;
    let (one, two) = (setup.proxy(&[]).await, setup.proxy(&[]).await);
    let args = json!({ "to": "cy@example.com" });
    let step = json!({ "idem/run_id": "run-9", "idem/step": 4 });
    call(&one, "send_email", args.clone(), Some(step.clone())).await;
    let second = call(&two, "send_email", args.clone(), Some(step)).await;
    assert!(
        text(&second).starts_with("already completed at step 4"),
        "{second:?}"
    );

    let keyed = json!({ "idem/key": "welcome:cy" });
    call(
        &one,
        "send_email",
        json!({ "to": "cy", "n": 1 }),
        Some(keyed.clone()),
    )
    .await;
    let other = call(
        &two,
        "send_email",
        json!({ "to": "cy", "n": 1 }),
        Some(keyed),
    )
    .await;
    assert!(text(&other).starts_with("already completed"), "{other:?}");
    assert_eq!(setup.effects_of("send_email"), 2, "one per key");

    // Without `_meta`, each proxy is its own run: the same arguments act in each.
    call(&one, "send_email", args.clone(), None).await;
    call(&two, "send_email", args, None).await;
    assert_eq!(setup.effects_of("send_email"), 4);
}

async fn a_hanging_upstream_leaves_the_outcome_unknown(db: Db) {
    let setup = Setup::new(db).await;
    let host = setup.proxy(&["--upstream-timeout", "1"]).await;
    let lost = call(&host, "export_everything", json!({}), None).await;
    assert!(
        text(&lost).contains("outcome of this call is unknown"),
        "{lost:?}"
    );
    assert_eq!(
        setup.operation("export_everything").await["status"],
        "unknown"
    );

    let again = call(&host, "export_everything", json!({}), None).await;
    assert!(text(&again).contains("Do not retry"), "{again:?}");
    assert_eq!(setup.effects_of("export_everything"), 1, "never re-sent");

    // An operator who checked settles it; the model then gets that outcome, once.
    let id = setup.operation("export_everything").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let operator = setup.app.person(Role::Operator).await;
    let resolve = json!({ "outcome": "succeeded", "result": { "exported": 42 },
                          "reason": "the export arrived" });
    let resolved = operator
        .post_json(&format!("/v1/operations/{id}/resolve"), &resolve)
        .await;
    assert_eq!(resolved.status(), 200);
    let settled = call(&host, "export_everything", json!({}), None).await;
    let said = text(&settled);
    assert!(
        said.starts_with("already completed") && said.contains("42"),
        "{said}"
    );
    assert_eq!(setup.effects_of("export_everything"), 1);
}

async fn the_proxy_warns_about_unregistered_tools(db: Db) {
    let setup = Setup::new(db).await;
    setup.register("send_email", "non_idempotent_write").await;
    let (host, stderr) = setup.proxy_for((), &[], Stdio::piped()).await;
    // The warnings come before the proxy answers the handshake; closing it ends stderr.
    host.cancel().await.unwrap();
    let mut warnings = String::new();
    stderr.unwrap().read_to_string(&mut warnings).await.unwrap();
    assert!(
        warnings.contains(r#"tool "wire_transfer" is not registered"#),
        "{warnings}"
    );
    assert!(!warnings.contains(r#""send_email""#), "{warnings}");
}

/// `idem tools import-mcp` against the sandbox, on the app's database.
fn import(setup: &Setup, extra: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["tools", "import-mcp"])
        .args(extra)
        .arg("--")
        .args(setup.sandbox_command())
        .env("IDEM_DATABASE_URL", setup.app.database.url())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

async fn effect_of(admin: &Client, tool: &str) -> (bool, String) {
    let body: Value = admin
        .get(&format!("/v1/tools/{tool}"))
        .await
        .json()
        .await
        .unwrap();
    (
        body["registered"] == true,
        body["effect"].as_str().unwrap().to_owned(),
    )
}

async fn import_registers_new_tools(db: Db) {
    let setup = Setup::new(db).await;
    setup.register("send_email", "irreversible").await;
    let admin = setup.app.person(Role::Admin).await;

    let dry = import(&setup, &["--dry-run"]);
    assert!(dry.contains("would register"), "{dry}");
    assert!(
        !effect_of(&admin, "lookup_order").await.0,
        "a dry run registers nothing"
    );

    let table = import(&setup, &[]);
    assert!(table.contains("kept (already registered)"), "{table}");
    let expected = [
        ("lookup_order", "read_only"),
        ("set_address", "idempotent_write"),
        ("charge_declined", "non_idempotent_write"),
        ("wire_transfer", "irreversible"),
        ("unannotated", "irreversible"),
        ("send_email", "irreversible"),
    ];
    for (tool, effect) in expected {
        assert_eq!(
            effect_of(&admin, tool).await,
            (true, effect.to_owned()),
            "{tool}"
        );
    }
}

pub(crate) mod over_http {
    //! The same proxy with streamable HTTP on both sides: the sandbox upstream served with
    //! `--listen`, the proxy reaching it with `--upstream-url` and serving the host with
    //! `--listen`, and rmcp's streamable-HTTP client as the host.

    use super::*;
    use rmcp::transport::StreamableHttpClientTransport;
    use tokio::io::{AsyncBufReadExt, BufReader};
    use tokio::process::Child;

    on_both_databases!(
        an_http_host_through_an_http_proxy_acts_once_and_is_told,
        meta_keys_make_two_http_proxies_act_once,
    );

    /// A child process serving MCP over HTTP, killed when dropped, and its endpoint.
    pub(crate) struct Served {
        _child: Child,
        url: String,
    }

    /// Starts `idem <args>` and waits for it to say where it serves MCP.
    async fn serve(args: Vec<String>) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
            .args(&args)
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let waited = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.split("serving MCP on ").nth(1) {
                    return url.trim().to_owned();
                }
            }
            panic!("idem {args:?} ended without serving");
        });
        let url = waited.await.expect("it says where it serves");
        // Keep reading so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Served { _child: child, url }
    }

    impl Setup {
        pub(crate) async fn http_upstream(&self) -> Served {
            let mut args = self.sandbox_command();
            args.remove(0);
            args.extend(["--listen".into(), "127.0.0.1:0".into()]);
            serve(args).await
        }

        pub(crate) async fn http_proxy(&self, upstream: &Served) -> Served {
            let args = [
                "mcp-proxy",
                "--idem-url",
                &self.app.address,
                "--api-key",
                &self.key,
                "--listen",
                "127.0.0.1:0",
                "--upstream-url",
                &upstream.url,
            ];
            serve(args.iter().map(|arg| arg.to_string()).collect()).await
        }
    }

    async fn host_of(proxy: &Served) -> Host {
        host_with(proxy, ()).await
    }

    /// A host over HTTP, with `handler` taking what the proxy sends of its own accord.
    pub(crate) async fn host_with<H: Service<RoleClient>>(
        proxy: &Served,
        handler: H,
    ) -> RunningService<RoleClient, H> {
        let transport = StreamableHttpClientTransport::from_uri(proxy.url.as_str());
        handler
            .serve(transport)
            .await
            .expect("the proxy speaks MCP over HTTP")
    }

    async fn an_http_host_through_an_http_proxy_acts_once_and_is_told(db: Db) {
        let setup = Setup::new(db).await;
        let upstream = setup.http_upstream().await;
        let proxy = setup.http_proxy(&upstream).await;
        let host = host_of(&proxy).await;
        let tools = host.peer().list_all_tools().await.unwrap();
        assert!(tools.iter().any(|t| t.name == "send_email"));

        let args = json!({ "to": "ann@example.com", "body": "over http" });
        acts_once_and_says_so(&setup, &host, args).await;
    }

    async fn meta_keys_make_two_http_proxies_act_once(db: Db) {
        let setup = Setup::new(db).await;
        let upstream = setup.http_upstream().await;
        let (one, two) = (
            setup.http_proxy(&upstream).await,
            setup.http_proxy(&upstream).await,
        );
        let (one, two) = (host_of(&one).await, host_of(&two).await);
        let args = json!({ "to": "cy@example.com" });
        let step = json!({ "idem/run_id": "run-h", "idem/step": 2 });
        call(&one, "send_email", args.clone(), Some(step.clone())).await;
        let second = call(&two, "send_email", args, Some(step)).await;
        assert!(
            text(&second).starts_with("already completed at step 2"),
            "{second:?}"
        );
        assert_eq!(setup.effects_of("send_email"), 1);
    }
}
