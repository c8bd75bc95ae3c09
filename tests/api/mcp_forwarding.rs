//! What `idem mcp-proxy` passes through besides tool calls: resources, prompts, the
//! upstream's notifications (list changes, progress, log messages, resource updates) and the
//! host's cancellation. Over stdio with one host, and over streamable HTTP with two host
//! sessions sharing the proxy's one upstream connection. The sandbox upstream has a resource,
//! a prompt, a tool that reports progress and logs (`build_report`) and one that changes its
//! lists (`refresh_catalog`); it writes what a client asked of it to its effects file.

#![allow(deprecated)] // resources/subscribe and logging: what today's hosts use.

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest, ClientResult,
    GetPromptRequestParams, ProgressToken, ReadResourceRequestParams, Request, ServerNotification,
    ServerRequest, ServerResult, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RoleClient, RunningService, Service,
};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tokio::sync::watch;

use crate::faults::wait_for_status;
use crate::helpers::Db;
use crate::mcp_proxy::over_http::{host_with, Served};
use crate::mcp_proxy::{call, text, Setup};
use crate::on_both_databases;

const ORDER: &str = "sandbox://orders/42";
const PROGRESS: &str = "notifications/progress";
const LOG: &str = "notifications/message";

on_both_databases!(
    resources_and_prompts_pass_through,
    progress_and_log_lines_reach_the_host,
    list_changes_and_resource_updates_reach_the_host,
    a_cancelled_call_is_cancelled_upstream_and_left_unknown,
    over_http_each_session_gets_its_own_progress_and_every_list_change,
    over_http_a_resource_update_goes_to_its_subscribers_only,
    over_http_a_cancelled_call_is_cancelled_upstream_and_left_unknown,
);

/// A host that keeps every notification the proxy sends it, as JSON.
#[derive(Clone)]
struct Heard(watch::Sender<Vec<Value>>);

impl Heard {
    fn new() -> Self {
        Self(watch::channel(Vec::new()).0)
    }

    /// Waits (10 s at most) until what was heard is `enough`, and returns it.
    async fn until(&self, what: &str, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let mut heard = self.0.subscribe();
        let waited = tokio::time::timeout(Duration::from_secs(10), heard.wait_for(|h| enough(h)));
        let heard = match waited.await {
            Ok(Ok(heard)) => heard.clone(),
            _ => panic!("never heard {what}; heard {:#?}", *self.0.borrow()),
        };
        heard
    }

    /// The notifications of `method` heard so far.
    fn of(&self, method: &str) -> Vec<Value> {
        of(&self.0.borrow(), method)
    }
}

fn of(heard: &[Value], method: &str) -> Vec<Value> {
    heard
        .iter()
        .filter(|n| n["method"] == method)
        .cloned()
        .collect()
}

impl Service<RoleClient> for Heard {
    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _: NotificationContext<RoleClient>,
    ) -> Result<(), McpError> {
        let heard = serde_json::to_value(&notification).unwrap();
        self.0.send_modify(|all| all.push(heard));
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    /// The proxy passes the upstream's requests on to no host; any would be a bug.
    async fn handle_request(
        &self,
        request: ServerRequest,
        _: RequestContext<RoleClient>,
    ) -> Result<ClientResult, McpError> {
        panic!("the proxy sent the host a request: {request:?}")
    }
}

type Host = RunningService<RoleClient, Heard>;

/// Two host sessions over HTTP on one proxy (which has one upstream connection), and what
/// each heard.
struct TwoSessions {
    hosts: [Host; 2],
    heard: [Heard; 2],
    _servers: (Served, Served),
}

async fn two_sessions(setup: &Setup) -> TwoSessions {
    let upstream = setup.http_upstream().await;
    let proxy = setup.http_proxy(&upstream).await;
    let heard = [Heard::new(), Heard::new()];
    let hosts = [
        host_with(&proxy, heard[0].clone()).await,
        host_with(&proxy, heard[1].clone()).await,
    ];
    TwoSessions {
        hosts,
        heard,
        _servers: (upstream, proxy),
    }
}

/// Calls `tool`; its result and the progress token the host's request carried (rmcp gives
/// every request one).
async fn call_with_progress<H: Service<RoleClient>>(
    host: &RunningService<RoleClient, H>,
    tool: &str,
    args: Value,
) -> (CallToolResult, Value) {
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap());
    let request = ClientRequest::CallToolRequest(Request::new(params));
    let options = PeerRequestOptions::no_options();
    let sent = host.peer().send_request_with_option(request, options);
    let handle = sent.await.unwrap();
    let token: &ProgressToken = &handle.progress_token;
    let token = serde_json::to_value(token).unwrap();
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(result) => (result, token),
        other => panic!("not a tool result: {other:?}"),
    }
}

/// Polls until `done` (10 s at most): for what only a file or idem's API shows.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

async fn resources_and_prompts_pass_through(db: Db) {
    let setup = Setup::new(db).await;
    let (host, _) = setup.proxy_for(Heard::new(), &[], Stdio::null()).await;

    let resources = host.peer().list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, [ORDER]);
    let read = host
        .peer()
        .read_resource(ReadResourceRequestParams::new(ORDER))
        .await
        .unwrap();
    let read = serde_json::to_value(read).unwrap();
    assert_eq!(read["contents"][0]["text"], "order 42: shipped", "{read}");

    let prompts = host.peer().list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "order_summary");
    let args = json!({ "order_id": "42" }).as_object().cloned().unwrap();
    let prompt = GetPromptRequestParams::new("order_summary").with_arguments(args);
    let prompt = host.peer().get_prompt(prompt).await.unwrap();
    let prompt = serde_json::to_value(prompt).unwrap();
    assert_eq!(
        prompt["messages"][0]["content"]["text"], "Summarize order 42.",
        "{prompt}"
    );

    let agent = setup.app.agent_with_key(&setup.key);
    let listed: Value = agent.get("/v1/operations").await.json().await.unwrap();
    assert_eq!(
        listed["operations"],
        json!([]),
        "only tool calls are recorded"
    );
}

async fn progress_and_log_lines_reach_the_host(db: Db) {
    let setup = Setup::new(db).await;
    let heard = Heard::new();
    let (host, _) = setup.proxy_for(heard.clone(), &[], Stdio::null()).await;

    let args = json!({ "month": "march" });
    let (result, token) = call_with_progress(&host, "build_report", args.clone()).await;
    assert_eq!(text(&result), format!("report of {args}"));

    let all = heard
        .until("three steps and a log line", |h| {
            of(h, PROGRESS).len() == 3 && of(h, LOG).len() == 1
        })
        .await;
    for progress in of(&all, PROGRESS) {
        assert_eq!(
            progress["params"]["progressToken"], token,
            "the host's own token"
        );
        assert_eq!(progress["params"]["total"], 3.0);
    }
    assert_eq!(
        of(&all, LOG)[0]["params"]["data"],
        json!({ "building": args })
    );
    assert_eq!(setup.operation("build_report").await["status"], "succeeded");
}

async fn list_changes_and_resource_updates_reach_the_host(db: Db) {
    let setup = Setup::new(db).await;
    let heard = Heard::new();
    let (host, _) = setup.proxy_for(heard.clone(), &[], Stdio::null()).await;
    let before = host.peer().list_all_tools().await.unwrap();
    assert!(!before.iter().any(|t| t.name == "track_parcel"));
    host.peer()
        .subscribe(SubscribeRequestParams::new(ORDER))
        .await
        .unwrap();

    call(&host, "refresh_catalog", json!({}), None).await;
    let changes = [
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    ];
    let all = heard
        .until("every change", |h| {
            changes.iter().all(|c| !of(h, c).is_empty())
        })
        .await;
    assert_eq!(of(&all, changes[3])[0]["params"]["uri"], ORDER);
    let after = host.peer().list_all_tools().await.unwrap();
    assert!(
        after.iter().any(|t| t.name == "track_parcel"),
        "the host lists again and gets the new tool"
    );
}

async fn a_cancelled_call_is_cancelled_upstream_and_left_unknown(db: Db) {
    let setup = Setup::new(db).await;
    let (host, _) = setup.proxy_for((), &[], Stdio::null()).await;
    cancelling_cancels_upstream_and_leaves_unknown(&setup, &host).await;
}

async fn over_http_a_cancelled_call_is_cancelled_upstream_and_left_unknown(db: Db) {
    let setup = Setup::new(db).await;
    let upstream = setup.http_upstream().await;
    let proxy = setup.http_proxy(&upstream).await;
    let host = host_with(&proxy, ()).await;
    cancelling_cancels_upstream_and_leaves_unknown(&setup, &host).await;
}

/// The host cancels a call the upstream is running: the upstream hears of it, and idem
/// records the outcome as unknown (it may have acted), never as failed.
async fn cancelling_cancels_upstream_and_leaves_unknown<H: Service<RoleClient>>(
    setup: &Setup,
    host: &RunningService<RoleClient, H>,
) {
    let params = CallToolRequestParams::new("export_everything")
        .with_arguments(json!({ "to": "s3" }).as_object().cloned().unwrap());
    let request = ClientRequest::CallToolRequest(Request::new(params));
    let options = PeerRequestOptions::no_options();
    let handle = host.peer().send_cancellable_request(request, options);
    let handle = handle.await.unwrap();
    eventually("the upstream started the export", || {
        setup.effects_of("export_everything") == 1
    })
    .await;

    handle
        .cancel(Some("the user pressed stop".into()))
        .await
        .unwrap();
    eventually("the upstream heard the cancellation", || {
        setup.effects_of("cancelled") == 1
    })
    .await;
    let id = setup.operation("export_everything").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = setup.app.agent_with_key(&setup.key);
    let operation = wait_for_status(&agent, &id, "unknown").await;
    let why = operation["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("the host cancelled"), "{operation}");
}

async fn over_http_each_session_gets_its_own_progress_and_every_list_change(db: Db) {
    let setup = Setup::new(db).await;
    let sessions = two_sessions(&setup).await;
    let (host_one, host_two) = (&sessions.hosts[0], &sessions.hosts[1]);
    let (one, two) = (&sessions.heard[0], &sessions.heard[1]);

    let ((_, token_one), (_, token_two)) = tokio::join!(
        call_with_progress(host_one, "build_report", json!({ "for": "one" })),
        call_with_progress(host_two, "build_report", json!({ "for": "two" })),
    );
    assert_eq!(
        token_one, token_two,
        "both hosts chose the same token: only the proxy tells their progress apart"
    );
    let sessions = [
        (&one, "one", "two", token_one),
        (&two, "two", "one", token_two),
    ];
    for (heard, me, other, token) in sessions {
        let all = heard
            .until("three steps", |h| of(h, PROGRESS).len() == 3)
            .await;
        for progress in of(&all, PROGRESS) {
            let message = progress["params"]["message"].as_str().unwrap();
            assert!(
                message.contains(me) && !message.contains(other),
                "{me}: {message}"
            );
            assert_eq!(progress["params"]["progressToken"], token);
        }
    }

    // List changes and log lines belong to the upstream connection, not to a request:
    // every session hears them, whichever session's call caused them.
    call(host_one, "refresh_catalog", json!({}), None).await;
    for heard in [&one, &two] {
        heard
            .until("the tool list changed, and both log lines", |h| {
                !of(h, "notifications/tools/list_changed").is_empty() && of(h, LOG).len() == 2
            })
            .await;
    }
}

async fn over_http_a_resource_update_goes_to_its_subscribers_only(db: Db) {
    let setup = Setup::new(db).await;
    let TwoSessions {
        hosts: [host_one, host_two],
        heard: [one, two],
        _servers,
    } = two_sessions(&setup).await;
    let subscribe = || SubscribeRequestParams::new(ORDER);
    let unsubscribe = || UnsubscribeRequestParams::new(ORDER);
    host_one.peer().subscribe(subscribe()).await.unwrap();
    host_two.peer().subscribe(subscribe()).await.unwrap();
    host_one.peer().unsubscribe(unsubscribe()).await.unwrap();
    assert_eq!(
        setup.effects_of("resources/unsubscribe"),
        0,
        "the other session still holds the upstream subscription"
    );

    call(&host_two, "refresh_catalog", json!({}), None).await;
    let updated = "notifications/resources/updated";
    two.until("the update", |h| !of(h, updated).is_empty())
        .await;
    one.until("the list change sent just before it", |h| {
        !of(h, "notifications/resources/list_changed").is_empty()
    })
    .await;
    host_one.peer().list_all_tools().await.unwrap();
    assert!(one.of(updated).is_empty(), "{:?}", one.of(updated));

    host_two.peer().unsubscribe(unsubscribe()).await.unwrap();
    assert_eq!(
        setup.effects_of("resources/unsubscribe"),
        1,
        "the last one out"
    );

    // A session that ends holding a subscription gives it up.
    host_one.peer().subscribe(subscribe()).await.unwrap();
    host_one.cancel().await.unwrap();
    eventually("the ended session's subscription ends upstream", || {
        setup.effects_of("resources/unsubscribe") == 2
    })
    .await;
}
