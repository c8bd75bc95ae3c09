//! One operation: everything the ledger knows about it, its audit trail, and the actions the
//! viewer's role allows in its current status.

use leptos::prelude::*;
use leptos_router::components::A;

use super::path_id::read_path_id;
use crate::components::{
    use_viewer, CopyText, EffectBadge, EmptyState, ErrorNote, FieldList, Frame, JsonView,
    OperationActions, Permitted, RelativeTime, StatusBadge,
};
use crate::domain::OperationStatus;
use crate::server_fns::{read_earlier_events, read_operation};
use crate::views::{EventView, EventsView, OperationDetail};
use crate::UiError;

#[component]
pub fn OperationPage() -> impl IntoView {
    view! {
        <Frame>
            <Operation />
        </Frame>
    }
}

#[component]
fn Operation() -> impl IntoView {
    let operation = read_path_id(read_operation);

    view! {
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match operation.await {
                    Ok(Some(detail)) => view! { <Detail detail /> }.into_any(),
                    Ok(None) | Err(UiError::NotFound(_)) => view! { <NoSuchOperation /> }.into_any(),
                    Err(error) => view! { <ErrorNote error /> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn NoSuchOperation() -> impl IntoView {
    view! {
        <h1>"No such operation"</h1>
        <EmptyState title="No such operation">
            "The link may be mistyped, or the operation belongs to another server. "
            <A href="/operations">"Back to all operations"</A>
        </EmptyState>
    }
}

#[component]
fn Detail(detail: OperationDetail) -> impl IntoView {
    let row = detail.row.clone();
    let permitted = Permitted::of(&use_viewer());
    view! {
        <div class="heading-row">
            <h1 class="operation-title">
                {row.tool.clone()} " " <StatusBadge status=row.status />
            </h1>
            <A href="/operations">"← All operations"</A>
        </div>
        <OperationActions id=row.id status=row.status permitted />
        <div class="operation-grid">
            <section class="card" aria-labelledby="facts">
                <h2 id="facts">"Operation"</h2>
                <Facts detail=detail.clone() />
            </section>
            <section class="card" aria-labelledby="args">
                <h2 id="args">"Arguments"</h2>
                <FieldList value=detail.args.clone() />
                <Outcome detail=detail.clone() />
            </section>
        </div>
        <section class="card" aria-labelledby="timeline">
            <h2 id="timeline">"Timeline"</h2>
            <Timeline id=row.id events=detail.events />
        </section>
    }
}

/// A time, or a dash when there is none.
fn maybe_time(at: Option<chrono::DateTime<chrono::Utc>>) -> AnyView {
    match at {
        Some(at) => view! { <RelativeTime at /> }.into_any(),
        None => view! { <span class="muted">"—"</span> }.into_any(),
    }
}

fn or_dash(text: Option<String>) -> String {
    text.unwrap_or_else(|| "—".to_owned())
}

#[component]
fn Facts(detail: OperationDetail) -> impl IntoView {
    let row = detail.row;
    // A settled operation keeps its last lease on record; it no longer means anything.
    let lease = detail
        .lease_expires_at
        .filter(|_| row.status == OperationStatus::Pending);
    let run = or_dash(row.run_id);
    let step = row.step.map_or("—".to_owned(), |s| s.to_string());
    let reconcile = if detail.reconcile_attempts == 0 && detail.next_reconcile_at.is_none() {
        view! { <span class="muted">"none"</span> }.into_any()
    } else {
        view! {
            {detail.reconcile_attempts} " attempts · next "
            {maybe_time(detail.next_reconcile_at)}
        }
        .into_any()
    };
    view! {
        <dl class="fields" data-testid="operation-facts">
            <dt>"Key"</dt>
            <dd><CopyText text=row.key label="key" /></dd>
            <dt>"Id"</dt>
            <dd><CopyText text=row.id.to_string() label="id" /></dd>
            <dt>"Namespace"</dt>
            <dd>{row.namespace}</dd>
            <dt>"Tool"</dt>
            <dd>{row.tool} " " <EffectBadge effect=row.effect /></dd>
            <dt>"Key source"</dt>
            <dd>{detail.key_source}</dd>
            <dt>"Fingerprint"</dt>
            <dd><code class="fingerprint">{detail.fingerprint}</code></dd>
            <dt>"Run / step"</dt>
            <dd>{run} " / " {step}</dd>
            <dt>"Attempt"</dt>
            <dd>{row.attempt}</dd>
            <dt>"Runner"</dt>
            <dd>{detail.runner}</dd>
            <dt>"Created"</dt>
            <dd><RelativeTime at=row.created_at /></dd>
            <dt>"Updated"</dt>
            <dd><RelativeTime at=row.updated_at /></dd>
            <dt>"Completed"</dt>
            <dd>{maybe_time(detail.completed_at)}</dd>
            <dt>"Expires"</dt>
            <dd><RelativeTime at=detail.expires_at /></dd>
            <dt>"Lease expires"</dt>
            <dd>{maybe_time(lease)}</dd>
            <dt>"Provider key"</dt>
            <dd><CopyText text=detail.provider_key label="provider key" /></dd>
            <dt>"Provider reference"</dt>
            <dd>
                {match detail.provider_ref {
                    Some(text) => view! { <CopyText text label="provider reference" /> }.into_any(),
                    None => view! { <span class="muted">"—"</span> }.into_any(),
                }}
            </dd>
            <dt>"Approval"</dt>
            <dd><Approval detail_approval=detail.approval expires=detail.approval_expires_at /></dd>
            <dt>"Reconciliation"</dt>
            <dd>{reconcile}</dd>
        </dl>
    }
}

#[component]
fn Approval(
    detail_approval: Option<crate::views::ApprovalView>,
    expires: Option<chrono::DateTime<chrono::Utc>>,
) -> impl IntoView {
    match (detail_approval, expires) {
        (Some(approval), _) => view! {
            <span class="approval">
                <strong>{approval.decision}</strong> " by " {approval.decided_by} " "
                <RelativeTime at=approval.decided_at />
                {approval.reason.map(|reason| view! { <q class="reason">{reason}</q> })}
            </span>
        }
        .into_any(),
        (None, Some(expires)) => view! {
            <span class="muted">"waiting; the request expires "</span>
            <RelativeTime at=expires />
        }
        .into_any(),
        (None, None) => view! { <span class="muted">"not needed"</span> }.into_any(),
    }
}

#[component]
fn Outcome(detail: OperationDetail) -> impl IntoView {
    view! {
        {detail.result.map(|value| view! {
            <h3>"Result"</h3>
            <JsonView value />
        })}
        {detail.error.map(|value| view! {
            <h3>
                "Error"
                {detail.retryable.then(|| view! { " " <span class="badge">"retryable"</span> })}
            </h3>
            <JsonView value />
        })}
    }
}

/// The newest events, oldest of them first, and a button that brings the ones before them
/// (an operation may have a million replays: the page never loads them all).
#[island]
fn Timeline(id: uuid::Uuid, events: EventsView) -> impl IntoView {
    let shown = RwSignal::new(events.events);
    let earlier = RwSignal::new(events.earlier);
    let more = Action::new(move |cursor: &String| read_earlier_events(id, cursor.clone()));
    Effect::new(move |_| {
        if let Some(Ok(page)) = more.value().get() {
            earlier.set(page.earlier);
            shown.update(|events| {
                let mut before = page.events;
                before.append(events);
                *events = before;
            });
        }
    });
    let error = move || match more.value().get() {
        Some(Err(error)) => Some(view! { <ErrorNote error /> }),
        _ => None,
    };
    view! {
        {move || earlier.get().map(|cursor| view! {
            <button
                class="secondary show-earlier"
                disabled=move || more.pending().get()
                on:click=move |_| {
                    more.dispatch(cursor.clone());
                }
            >
                "Show earlier events"
            </button>
        })}
        {error}
        {move || {
            let events = shown.get();
            if events.is_empty() {
                return view! { <p class="muted">"No events recorded."</p> }.into_any();
            }
            view! {
                <ol class="timeline">
                    {events.into_iter().map(|event| view! { <TimelineEvent event /> }).collect_view()}
                </ol>
            }
            .into_any()
        }}
    }
}

#[component]
fn TimelineEvent(event: EventView) -> impl IntoView {
    let detail = (!is_blank(&event.detail)).then(|| view! { <FieldList value=event.detail /> });
    view! {
        <li data-kind=event.kind.clone()>
            <div class="event-head">
                <RelativeTime at=event.at />
                <strong class="event-kind">{event.kind.replace('_', " ")}</strong>
                <span class="muted">"by " {event.actor}</span>
            </div>
            {detail}
        </li>
    }
}

/// Whether an event's detail carries nothing worth showing.
fn is_blank(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => true,
        serde_json::Value::Object(fields) => fields.is_empty(),
        _ => false,
    }
}
