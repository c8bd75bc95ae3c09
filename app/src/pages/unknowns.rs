//! Operations whose outcome nobody knows, the longest unknown first (so the stuck ones lead),
//! with how long each has been unknown and how many lookups failed, and a bulk "reconcile
//! selected" for operators.

use chrono::{DateTime, Utc};
use leptos::prelude::*;

use crate::operations_filter::OperationsFilter;
use leptos_router::components::A;
use uuid::Uuid;

use crate::components::{
    show_changes, use_viewer, ConfirmButton, CopyText, EmptyState, ErrorNote, Frame, RelativeTime,
    StatusBadge,
};
use crate::domain::{OperationStatus, Permission};
use crate::server_fns::{list_operations, reconcile_operation, PAGE_SIZE};
use crate::views::{OperationRow, StuckAfter};
use crate::UiError;

#[component]
pub fn UnknownsPage() -> impl IntoView {
    view! {
        <Frame>
            <Unknowns />
        </Frame>
    }
}

/// What one reconciliation of the bulk action came to.
#[derive(Debug, Clone)]
struct Reconciled {
    key: String,
    outcome: Result<OperationStatus, UiError>,
}

impl Reconciled {
    fn text(&self) -> String {
        match &self.outcome {
            Ok(OperationStatus::Unknown) => "still unknown".to_owned(),
            Ok(status) => format!("settled: {}", status.as_str().replace('_', " ")),
            Err(error) => error.to_string(),
        }
    }
}

#[component]
fn Unknowns() -> impl IntoView {
    let may_operate = use_viewer().may(Permission::Operate);
    let queue = Resource::new(
        || (),
        |_| {
            let unknown = OperationsFilter {
                status: "unknown".to_owned(),
                ..OperationsFilter::default()
            };
            list_operations(unknown, None, true)
        },
    );

    view! {
        <h1>"Unknowns"</h1>
        <Show when=move || may_operate>
            <ReconcileSelected />
        </Show>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match queue.await {
                    Ok(page) if page.rows.is_empty() => view! {
                        <Explained stuck_after=page.stuck_after />
                        <EmptyState title="No unknown operations.">
                            "An operation becomes unknown when a call's outcome could not be learned (a timeout, a lost answer). The reconciler asks the provider in the background; what it cannot settle waits here for you."
                        </EmptyState>
                    }
                    .into_any(),
                    Ok(page) => {
                        let more = page.next_cursor.is_some();
                        let stuck_after = page.stuck_after;
                        view! {
                            <Explained stuck_after />
                            <UnknownTable rows=oldest_first(page.rows) stuck_after may_operate />
                            {more.then(|| view! { <MoreUnknowns /> })}
                        }
                        .into_any()
                    }
                    Err(error) => view! { <ErrorNote error /> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// What the page lists, and from when an unknown is stuck.
#[component]
fn Explained(stuck_after: StuckAfter) -> impl IntoView {
    view! {
        <p class="muted" data-testid="stuck-after">
            {format!(
                "Operations whose outcome is unknown, the longest unknown first: idem never re-sends them. One unknown for more than {} is stuck.",
                stuck_after.words(),
            )}
        </p>
    }
}

/// The page's rows (the oldest unknowns), the longest unknown first: the stuck ones lead.
fn oldest_first(mut rows: Vec<OperationRow>) -> Vec<OperationRow> {
    rows.sort_by_key(|row| row.unknown_since.unwrap_or(row.updated_at));
    rows
}

/// Said when more unknowns wait than one page shows.
#[component]
fn MoreUnknowns() -> impl IntoView {
    view! {
        <p class="muted" data-testid="more-unknowns">
            {format!("Showing the {PAGE_SIZE} oldest unknown operations; more are waiting. ")}
            <A href="/operations?status=unknown">"See every unknown operation"</A>
        </p>
    }
}

#[component]
fn UnknownTable(
    rows: Vec<OperationRow>,
    stuck_after: StuckAfter,
    may_operate: bool,
) -> impl IntoView {
    let now = Utc::now();
    view! {
        <div class="table-wrap">
            <table class="unknowns cards">
                <thead>
                    <tr>
                        <th scope="col">{may_operate.then(|| view! { <SelectAll /> })}</th>
                        <th scope="col">"Status"</th>
                        <th scope="col">"Tool"</th>
                        <th scope="col">"Key"</th>
                        <th scope="col">"Namespace"</th>
                        <th scope="col">"Unknown for"</th>
                        <th scope="col">"Failed lookups"</th>
                        <th scope="col">"Next attempt"</th>
                        <th scope="col"><span class="visually-hidden">"Details"</span></th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|row| view! { <UnknownRow row now stuck_after may_operate /> })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}

#[component]
fn UnknownRow(
    row: OperationRow,
    now: DateTime<Utc>,
    stuck_after: StuckAfter,
    may_operate: bool,
) -> impl IntoView {
    let id = row.id;
    let stuck = row.is_stuck(now, stuck_after);
    let since = row.unknown_since.unwrap_or(row.updated_at);
    let age = unknown_for(now - since);
    let select_label = format!("Select {}", row.key);
    view! {
        // `data-label`: on a phone each row is a card and each cell says what it is.
        <tr class:stuck=stuck data-morph-key=row.id.to_string()>
            <td data-label="Select" class="select">
                {may_operate.then(|| view! {
                    <input
                        type="checkbox"
                        name=SELECTED
                        value=id.to_string()
                        data-key=row.key.clone()
                        aria-label=select_label
                    />
                })}
            </td>
            <td data-label="Status"><StatusBadge status=row.status stuck /></td>
            <td data-label="Tool">{row.tool.clone()}</td>
            <td data-label="Key" class="key"><CopyText text=row.key.clone() label="key" truncate=true /></td>
            <td data-label="Namespace">{row.namespace.clone()}</td>
            <td data-label="Unknown for" data-testid="unknown-for">
                <time datetime=since.to_rfc3339() title=since.to_rfc3339()>{age}</time>
            </td>
            <td data-label="Failed lookups" data-testid="failed-lookups">{row.reconcile_attempts}</td>
            <td data-label="Next attempt">
                {match row.next_reconcile_at {
                    Some(at) => view! { <RelativeTime at /> }.into_any(),
                    None => view! { <span class="muted">"none scheduled"</span> }.into_any(),
                }}
            </td>
            <td data-label="Open"><A href=format!("/operations/{id}")>"Details"</A></td>
        </tr>
    }
}

/// How long an operation has been unknown, in its two largest units (`3 h 20 min`).
fn unknown_for(age: chrono::TimeDelta) -> String {
    let minutes = age.num_minutes().max(0);
    match (minutes / (24 * 60), minutes / 60 % 24, minutes % 60) {
        (0, 0, 0) => "under a minute".to_owned(),
        (0, 0, m) => format!("{m} min"),
        (0, h, m) => format!("{h} h {m} min"),
        (d, h, _) => format!("{d} d {h} h"),
    }
}

/// The name of the rows' checkboxes; the islands below find them by it.
const SELECTED: &str = "selected";

/// The rows' checkboxes: read and ticked in the browser; on the server, where islands only
/// render, nothing is ticked and nothing changes.
#[cfg(feature = "hydrate")]
use crate::browser::checkboxes as boxes;

#[cfg(not(feature = "hydrate"))]
mod boxes {
    use leptos::prelude::ArcTrigger;
    use uuid::Uuid;

    pub fn ticked(_name: &str) -> Vec<(Uuid, String)> {
        Vec::new()
    }

    pub fn tick_all(_name: &str, _on: bool) {}

    pub fn count(_name: &str) -> usize {
        0
    }

    pub fn selection_changes() -> ArcTrigger {
        ArcTrigger::new()
    }
}

/// The header's "select all" box.
#[island]
fn SelectAll() -> impl IntoView {
    let changes = boxes::selection_changes();
    let all_ticked = move || {
        changes.track();
        let ticked = boxes::ticked(SELECTED).len();
        ticked > 0 && ticked == boxes::count(SELECTED)
    };
    view! {
        <input
            type="checkbox"
            aria-label="Select all"
            prop:checked=all_ticked
            on:change=move |ev| boxes::tick_all(SELECTED, event_target_checked(&ev))
        />
    }
}

/// "Reconcile selected", and what the last bulk reconciliation came to.
#[island]
fn ReconcileSelected() -> impl IntoView {
    let changes = boxes::selection_changes();
    let reconcile = Action::new(|targets: &Vec<(Uuid, String)>| {
        let targets = targets.clone();
        async move {
            let mut done = Vec::with_capacity(targets.len());
            for (id, key) in targets {
                let outcome = reconcile_operation(id).await.map(|row| row.status);
                done.push(Reconciled { key, outcome });
            }
            show_changes();
            done
        }
    });
    let none_chosen = Signal::derive(move || {
        changes.track();
        boxes::ticked(SELECTED).is_empty() || reconcile.pending().get()
    });
    let on_reconcile = Callback::new(move |_reason: String| {
        reconcile.dispatch(boxes::ticked(SELECTED));
        boxes::tick_all(SELECTED, false);
    });
    view! {
        <div class="bulk">
            <ConfirmButton
                label="Reconcile selected"
                question="Ask each selected operation's provider now whether it happened, and settle it by the answer?".to_owned()
                on_confirm=on_reconcile
                disabled=none_chosen
            />
        </div>
        <ReconcileResults results=reconcile.value() />
    }
}

/// What the last bulk reconciliation came to, one line per operation; it stays when the
/// settled operations leave the table.
#[component]
fn ReconcileResults(#[prop(into)] results: Signal<Option<Vec<Reconciled>>>) -> impl IntoView {
    move || {
        results.get().map(|results| {
            view! {
                <section class="reconcile-results" aria-label="Reconciliation results" role="status">
                    <h2>"Reconciliation results"</h2>
                    <ul>
                        {results
                            .into_iter()
                            .map(|done| {
                                let settled = matches!(done.outcome, Ok(s) if s != OperationStatus::Unknown);
                                view! {
                                    <li class:ok=settled class:error=done.outcome.is_err() data-key=done.key.clone()>
                                        <code>{done.key.clone()}</code>": "{done.text()}
                                    </li>
                                }
                            })
                            .collect_view()}
                    </ul>
                </section>
            }
        })
    }
}
