//! The approval queue: operations waiting for a person, oldest first, each with its arguments
//! laid out and, for approvers, inline approve and reject.

use leptos::prelude::*;
use leptos_router::components::A;

use super::approval::run_label;
use crate::components::{
    show_changes_when, use_viewer, ConfirmButton, CopyText, EffectBadge, EmptyState, ErrorNote,
    FieldList, Frame, Reason, RelativeTime,
};
use crate::domain::Permission;
use crate::server_fns::{approval_queue, ApprovalRequest, ApproveOperation, RejectOperation};

#[component]
pub fn ApprovalsPage() -> impl IntoView {
    view! {
        <Frame>
            <Approvals />
        </Frame>
    }
}

#[component]
fn Approvals() -> impl IntoView {
    let queue = Resource::new(|| (), |_| approval_queue());
    // Cards are keyed by operation id (`data-morph-key`; a key is unique only within its
    // namespace), so a live refresh adds and removes cards and leaves the others (and a
    // half-typed reason in their decision island) alone.
    let requests = move || queue.get().and_then(Result::ok).unwrap_or_default();
    let loaded_empty = move || {
        queue
            .get()
            .is_some_and(|page| page.is_ok_and(|p| p.is_empty()))
    };

    view! {
        <h1>"Approvals"</h1>
        <p class="muted">"Requests waiting for a person, oldest first."</p>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || queue.get().and_then(Result::err).map(|error| view! { <ErrorNote error /> })}
            <Show when=loaded_empty>
                <EmptyState title="Nothing waits for approval.">
                    "Irreversible tools (or tools with approval: always) put requests here."
                </EmptyState>
            </Show>
            <ul class="approval-queue" aria-label="Approval requests">
                <For each=requests key=|request| request.row.id let:request>
                    <ApprovalCard request />
                </For>
            </ul>
        </Transition>
    }
}

/// One request: what would run, for whom, and the buttons to decide.
#[component]
fn ApprovalCard(request: ApprovalRequest) -> impl IntoView {
    let ApprovalRequest {
        row,
        args,
        expires_at,
    } = request;
    let id = row.id;
    let may_decide = use_viewer().may(Permission::Approve);
    let run = run_label(&row);

    view! {
        <li class="card approval" data-morph-key=row.id.to_string()>
            <header class="approval-head">
                <strong class="tool">{row.tool.clone()}</strong>
                <EffectBadge effect=row.effect />
                <A href=format!("/approvals/{id}") attr:class="open">"Open request"</A>
            </header>
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
            <Show when=move || may_decide>
                <Decision id tool=row.tool.clone() />
            </Show>
        </li>
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
