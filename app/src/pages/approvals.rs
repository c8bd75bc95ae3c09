//! The approval queue: operations waiting for a person, oldest first, each with its arguments
//! laid out and, for approvers, inline approve and reject.

use leptos::prelude::*;
use leptos_router::components::A;

use super::approval_request::{ApprovalFields, Decision};
use crate::components::{use_viewer, EffectBadge, EmptyState, ErrorNote, Frame};
use crate::domain::Permission;
use crate::server_fns::{approval_queue, ApprovalRequest};

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
    let row = request.row.clone();
    let id = row.id;
    let may_decide = use_viewer().may(Permission::Approve);

    view! {
        <li class="card approval" data-morph-key=id.to_string()>
            <header class="approval-head">
                <strong class="tool">{row.tool.clone()}</strong>
                <EffectBadge effect=row.effect />
                <A href=format!("/approvals/{id}") attr:class="open">"Open request"</A>
            </header>
            <ApprovalFields request />
            <Show when=move || may_decide>
                <Decision id tool=row.tool.clone() />
            </Show>
        </li>
    }
}
