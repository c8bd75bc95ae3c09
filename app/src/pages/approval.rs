//! One request for approval: the call, its arguments, what the same run did before it, and
//! (for approvers, while it waits) the decision the queue offers.

use leptos::prelude::*;
use leptos_router::components::A;

use super::approval_request::{ApprovalFields, Decision};
use super::path_id::read_path_id;
use super::NotFound;
use crate::components::{use_viewer, EffectBadge, ErrorNote, Frame, RelativeTime, StatusBadge};
use crate::domain::{OperationStatus, Permission};
use crate::server_fns::{read_approval, ApprovalDetail};
use crate::views::OperationRow;
use crate::UiError;

#[component]
pub fn ApprovalPage() -> impl IntoView {
    let approval = read_path_id(read_approval);

    // An unknown id is a page that does not exist: the app's 404, outside the frame.
    view! {
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match approval.await {
                    Ok(Some(detail)) => {
                        view! { <Frame><Approval detail=detail.clone() /></Frame> }.into_any()
                    }
                    Ok(None) | Err(UiError::NotFound(_)) => view! { <NotFound /> }.into_any(),
                    Err(error) => {
                        view! { <Frame><ErrorNote error=error.clone() /></Frame> }.into_any()
                    }
                }
            })}
        </Transition>
    }
}

#[component]
fn Approval(detail: ApprovalDetail) -> impl IntoView {
    let ApprovalDetail { request, earlier } = detail;
    let row = request.row.clone();
    let id = row.id;
    let waiting = row.status == OperationStatus::AwaitingApproval;
    let may_decide = waiting && use_viewer().may(Permission::Approve);
    let has_run = row.run_id.is_some();
    let tool = row.tool.clone();

    let heading = view! {
        <div class="heading-row">
            <h1 class="operation-title">
                "Approve " {row.tool.clone()} "? " <StatusBadge status=row.status />
            </h1>
            <A href="/approvals">"← All approvals"</A>
        </div>
    };
    // Erased types: the page's full view type is too deep for the server crate's compiler.
    let card = view! {
        <article class="card approval" data-morph-key=id.to_string()>
            <header class="approval-head">
                <strong class="tool">{row.tool.clone()}</strong>
                <EffectBadge effect=row.effect />
                <A href=format!("/operations/{id}") attr:class="open">"Operation details"</A>
            </header>
            <ApprovalFields request />
            <Show when=move || may_decide>
                <Decision id tool=tool.clone() />
            </Show>
        </article>
    }
    .into_any();
    let earlier = view! { <EarlierInRun earlier has_run /> }.into_any();
    view! { {heading} {card} {earlier} }
}

/// What the agent's run did before asking: each earlier operation, linked to its page.
#[component]
fn EarlierInRun(earlier: Vec<OperationRow>, has_run: bool) -> impl IntoView {
    let note = match (has_run, earlier.is_empty()) {
        (false, _) => Some("The agent named no run, so there is nothing to show around it."),
        (true, true) => Some("This is the first operation of its run."),
        (true, false) => None,
    };
    view! {
        <section class="earlier-in-run" aria-label="Earlier in this run">
            <h2>"Earlier in this run"</h2>
            {note.map(|note| view! { <p class="muted">{note}</p> })}
            <ol class="run-operations">
                {earlier
                    .into_iter()
                    .map(|row| {
                        view! {
                            <li>
                                <A href=format!("/operations/{}", row.id)>{row.tool.clone()}</A>
                                " "
                                <StatusBadge status=row.status />
                                " "
                                <span class="muted">{row.key.clone()}</span>
                                " "
                                <RelativeTime at=row.created_at />
                            </li>
                        }
                    })
                    .collect_view()}
            </ol>
        </section>
    }
}
