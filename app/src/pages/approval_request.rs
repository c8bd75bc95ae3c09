//! What the queue's card and a request's own page both show of a request for approval: its
//! fields and arguments, and (for approvers) the decision.

use leptos::prelude::*;

use crate::components::{
    show_changes_when, ConfirmButton, CopyText, ErrorNote, FieldList, Reason, RelativeTime,
};
use crate::server_fns::{ApprovalRequest, ApproveOperation, RejectOperation};
use crate::views::OperationRow;

/// Where the request comes from, when it lapses, and the arguments it would run with.
#[component]
pub(crate) fn ApprovalFields(request: ApprovalRequest) -> impl IntoView {
    let ApprovalRequest {
        row,
        args,
        expires_at,
    } = request;
    let run = run_label(&row);
    view! {
        <dl class="fields">
            <dt>"Namespace"</dt>
            <dd>{row.namespace.clone()}</dd>
            <dt>"Key"</dt>
            <dd><CopyText text=row.key.clone() label="key" /></dd>
            <dt>"Run"</dt>
            <dd>{run}</dd>
            <dt>"Requested"</dt>
            <dd><RelativeTime at=row.created_at /></dd>
            <dt>"Approval expires"</dt>
            <dd>
                {match expires_at {
                    Some(at) => view! { <RelativeTime at /> }.into_any(),
                    None => view! { <span class="muted">"never"</span> }.into_any(),
                }}
            </dd>
        </dl>
        <h2 class="args-title">"Arguments"</h2>
        <FieldList value=args />
    }
}

/// `run · step n`, the run alone, or a dash when the agent named no run.
fn run_label(row: &OperationRow) -> String {
    match (&row.run_id, row.step) {
        (Some(run), Some(step)) => format!("{run} · step {step}"),
        (Some(run), None) => run.clone(),
        (None, _) => "—".to_owned(),
    }
}

/// Approve and reject, with the server's answer when it refuses (someone decided first).
#[island]
pub(crate) fn Decision(id: uuid::Uuid, tool: String) -> impl IntoView {
    let approve = ServerAction::<ApproveOperation>::new();
    let reject = ServerAction::<RejectOperation>::new();
    let busy = Signal::derive(move || approve.pending().get() || reject.pending().get());
    let outcome = move || {
        let approved = approve.value().get().map(|r| r.map(|_| "Approved."));
        let rejected = reject.value().get().map(|r| r.map(|_| "Rejected."));
        approved.or(rejected)
    };
    // Decided or refused (someone decided first), the card is done: show the queue as it is
    // now, also when the live stream is down.
    show_changes_when(move || outcome().is_some());
    let on_approve = Callback::new(move |reason: String| {
        let reason = Some(reason).filter(|r| !r.is_empty());
        approve.dispatch(ApproveOperation { id, reason });
    });
    let on_reject = Callback::new(move |reason: String| {
        reject.dispatch(RejectOperation {
            id,
            reason: Some(reason),
        });
    });

    view! {
        <div class="decision">
            <ConfirmButton
                label="Approve"
                question=format!("Let the agent run {tool} once with these arguments?")
                on_confirm=on_approve
                reason=Reason::Optional
                disabled=busy
            />
            <ConfirmButton
                label="Reject"
                question="Refuse this call? The agent is told your reason.".to_owned()
                on_confirm=on_reject
                reason=Reason::Required
                danger=true
                disabled=busy
            />
            {move || match outcome() {
                Some(Ok(done)) => view! { <p class="ok" role="status">{done}</p> }.into_any(),
                Some(Err(error)) => view! { <ErrorNote error /> }.into_any(),
                None => ().into_any(),
            }}
        </div>
    }
}
