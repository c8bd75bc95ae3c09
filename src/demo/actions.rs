//! Each of the demo agent's actions: the requests it sends and the answers it expects. An
//! answer other than the expected one is returned as an error, which the loop logs.

use rand::Rng;
use reqwest::StatusCode;
use serde_json::json;

use super::api::{CallError, Reply};
use super::scenario::with_other_args;
use super::tools::{CREATE_TICKET, DEPLOY, LOOKUP_ORDER, REFUND, REFUND_TIMEOUT_MS, SEND_EMAIL};
use super::workload::{Action, Agent, Route, Sent};

/// At most this many deployments wait for a person, so the queue stays reviewable.
const MAX_WAITING_APPROVALS: usize = 5;

/// The tools a fresh intent goes to, in turn.
const FRESH_TOOLS: [&str; 3] = [LOOKUP_ORDER, SEND_EMAIL, REFUND];

impl Agent {
    /// Does one action.
    pub(super) async fn act(&mut self, action: Action) -> Result<(), CallError> {
        match action {
            Action::Fresh => self.fresh().await,
            Action::ClaimAndComplete => self.claim_and_complete().await,
            Action::Replay => self.replay().await,
            Action::InFlightDuplicate => self.in_flight_duplicate().await,
            Action::Mismatch => self.mismatch().await,
            Action::Unknown => self.unknown().await,
            Action::PermanentError => self.permanent_error().await,
            Action::Approval => self.approval().await,
        }
    }

    async fn fresh(&mut self) -> Result<(), CallError> {
        let n = self.next_intent();
        let tool = FRESH_TOOLS[(n % FRESH_TOOLS.len() as u64) as usize];
        let body = self.scenario.body(tool, n);
        let reply = self.api.invoke(tool, &body).await?;
        expect(reply, StatusCode::CREATED, "invoke a new intent")?;
        self.remember(Route::Invoke(tool), body);
        Ok(())
    }

    async fn claim_and_complete(&mut self) -> Result<(), CallError> {
        let n = self.next_intent();
        let body = self.scenario.body(CREATE_TICKET, n);
        let reply = self.api.claim(&body).await?;
        let reply = expect(reply, StatusCode::CREATED, "claim a ticket")?;
        // Now and then the ticket system refuses for good: a failure is stored and replayed too.
        let refused = self.rng.random_ratio(1, 4);
        self.complete(&reply, n, refused).await?;
        self.remember(Route::Claim, body);
        Ok(())
    }

    async fn complete(&self, claimed: &Reply, n: u64, refused: bool) -> Result<(), CallError> {
        let (id, _) = claimed.operation();
        let token = &claimed.body["lease"]["token"];
        let report = if refused {
            json!({ "lease_token": token, "outcome": "failed", "retryable": false,
                    "error": { "code": "customer_not_found", "message": "no such customer" } })
        } else {
            json!({ "lease_token": token, "outcome": "succeeded",
                    "result": { "ticket_id": format!("TCK-{n}") }, "provider_ref": format!("TCK-{n}") })
        };
        let reply = self.api.complete(id, &report).await?;
        expect(reply, StatusCode::OK, "complete a ticket").map(drop)
    }

    /// A remembered request again: mostly `200` replays; `409` while it is still unknown.
    async fn replay(&mut self) -> Result<(), CallError> {
        let Some(sent) = self.recall(|_| true) else {
            return self.fresh().await;
        };
        let reply = self.send(&sent).await?;
        match reply.status {
            StatusCode::OK | StatusCode::CONFLICT => Ok(()),
            _ => Err(reply.unexpected("replay")),
        }
    }

    async fn in_flight_duplicate(&mut self) -> Result<(), CallError> {
        let n = self.next_intent();
        let body = self.scenario.body(CREATE_TICKET, n);
        let (first, second) = tokio::join!(self.api.claim(&body), self.api.claim(&body));
        let (first, second) = (first?, second?);
        let (started, duplicate) = if first.status == StatusCode::CREATED {
            (first, second)
        } else {
            (second, first)
        };
        let started = expect(started, StatusCode::CREATED, "claim one of two copies")?;
        self.complete(&started, n, false).await?;
        self.remember(Route::Claim, body);
        let code = "operation_in_progress";
        refused(duplicate, StatusCode::CONFLICT, code, "the other copy")
    }

    /// Only keys that do not depend on the arguments can be reused with other arguments (a
    /// key derived from run and step contains the fingerprint).
    async fn mismatch(&mut self) -> Result<(), CallError> {
        let Some(sent) = self.recall(|sent| matches!(sent.route, Route::Invoke(_))) else {
            return self.fresh().await;
        };
        let other = Sent {
            route: sent.route,
            body: with_other_args(&sent.body),
        };
        let reply = self.send(&other).await?;
        let code = "idempotency_key_reused";
        refused(
            reply,
            StatusCode::UNPROCESSABLE_ENTITY,
            code,
            "other arguments",
        )
    }

    /// The refund happens at the provider, but its answer comes too late: `unknown`. A retry
    /// is refused (`409`), and the reconciler finds the refund by its provider key. Every
    /// other time the first lookup fails too, so the operation stays unknown a few seconds
    /// longer. The faults name the action, not a key: idem sends each operation's own
    /// provider key, unknown until the invoke; the demo agent makes one call at a time.
    async fn unknown(&mut self) -> Result<(), CallError> {
        let n = self.next_intent();
        let body = self.scenario.body(REFUND, n);
        let delay_ms = u64::from(REFUND_TIMEOUT_MS) * 3;
        self.faults
            .queue(
                &json!({ "fault": "delay_after_commit", "action": REFUND, "delay_ms": delay_ms }),
            )
            .await?;
        if n.is_multiple_of(2) {
            self.faults
                .queue(&json!({ "fault": "lookup_error", "action": REFUND }))
                .await?;
        }
        let reply = self.api.invoke(REFUND, &body).await?;
        let reply = expect(reply, StatusCode::CREATED, "invoke a refund that times out")?;
        self.remember(Route::Invoke(REFUND), body.clone());
        if reply.operation().1 != "unknown" {
            return Err(reply.unexpected("a timed-out refund"));
        }
        let retry = self.api.invoke(REFUND, &body).await?;
        let code = "operation_outcome_unknown";
        refused(retry, StatusCode::CONFLICT, code, "retry an unknown refund")
    }

    async fn permanent_error(&mut self) -> Result<(), CallError> {
        let n = self.next_intent();
        let body = self.scenario.body(REFUND, n);
        let fault = json!({ "fault": "fail_before_commit", "action": REFUND, "status": 400 });
        self.faults.queue(&fault).await?;
        let reply = self.api.invoke(REFUND, &body).await?;
        let reply = expect(reply, StatusCode::CREATED, "invoke a refused refund")?;
        self.remember(Route::Invoke(REFUND), body);
        match reply.operation().1 {
            "failed" => Ok(()),
            _ => Err(reply.unexpected("a refused refund")),
        }
    }

    /// A deployment waits for a person; with enough already waiting, fresh work instead.
    async fn approval(&mut self) -> Result<(), CallError> {
        let waiting = self
            .api
            .awaiting_approval(DEPLOY, MAX_WAITING_APPROVALS)
            .await?;
        if waiting >= MAX_WAITING_APPROVALS {
            return self.fresh().await;
        }
        let n = self.next_intent();
        let body = self.scenario.body(DEPLOY, n);
        let reply = self.api.invoke(DEPLOY, &body).await?;
        expect(reply, StatusCode::ACCEPTED, "request a deployment").map(drop)
    }

    async fn send(&self, sent: &Sent) -> Result<Reply, CallError> {
        match sent.route {
            Route::Invoke(tool) => self.api.invoke(tool, &sent.body).await,
            Route::Claim => self.api.claim(&sent.body).await,
        }
    }
}

/// The reply if its status is `status`, else an error naming the step.
fn expect(reply: Reply, status: StatusCode, step: &'static str) -> Result<Reply, CallError> {
    if reply.status == status {
        Ok(reply)
    } else {
        Err(reply.unexpected(step))
    }
}

/// `Ok` if the reply is the refusal `status` with the error `code`, else an error naming the
/// step.
fn refused(
    reply: Reply,
    status: StatusCode,
    code: &str,
    step: &'static str,
) -> Result<(), CallError> {
    if reply.status == status && reply.error_code() == code {
        Ok(())
    } else {
        Err(reply.unexpected(step))
    }
}
