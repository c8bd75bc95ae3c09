//! Operations whose outcome nobody knows: stuck ones first, then the oldest, with a bulk
//! "reconcile selected" for operators.

use leptos::prelude::*;
use leptos_router::components::A;
use std::collections::BTreeSet;
use uuid::Uuid;

use crate::components::{
    use_live, use_now, use_viewer, ConfirmButton, CopyText, EmptyState, ErrorNote, Frame,
    RelativeTime, StatusBadge,
};
use crate::domain::{OperationStatus, Permission};
use crate::server_fns::{list_operations, reconcile_operation};
use crate::views::OperationRow;
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
    let live = use_live();
    let now = use_now();
    let may_operate = use_viewer().may(Permission::Operate);
    let selected = RwSignal::new(BTreeSet::<Uuid>::new());
    let reconcile = Action::new(|targets: &Vec<(Uuid, String)>| {
        let targets = targets.clone();
        async move {
            let mut done = Vec::with_capacity(targets.len());
            for (id, key) in targets {
                let outcome = reconcile_operation(id).await.map(|row| row.status);
                done.push(Reconciled { key, outcome });
            }
            done
        }
    });
    let queue = Resource::new(
        move || (live.version(), reconcile.version().get()),
        |_| {
            let status = Some("unknown".to_owned());
            list_operations(status, None, None, None, None, None, true)
        },
    );
    let rows = Memo::new(move |_| {
        let mut rows = queue
            .get()
            .and_then(Result::ok)
            .map(|page| page.rows)
            .unwrap_or_default();
        let at = now.get_untracked();
        rows.sort_by_key(|row| {
            (
                !row.is_stuck(at),
                row.unknown_since.unwrap_or(row.created_at),
            )
        });
        rows
    });
    // Only rows still on screen count as selected.
    let chosen = move || -> Vec<(Uuid, String)> {
        let picked = selected.get();
        rows.get()
            .into_iter()
            .filter(|row| picked.contains(&row.id))
            .map(|row| (row.id, row.key))
            .collect()
    };
    let none_chosen = Signal::derive(move || chosen().is_empty() || reconcile.pending().get());
    let on_reconcile = Callback::new(move |_reason: String| {
        reconcile.dispatch(chosen());
        selected.set(BTreeSet::new());
    });
    let all_selected = move || {
        let rows = rows.get();
        !rows.is_empty() && rows.iter().all(|row| selected.read().contains(&row.id))
    };
    let toggle_all = move |on: bool| {
        selected.set(if on {
            rows.get().iter().map(|row| row.id).collect()
        } else {
            BTreeSet::new()
        })
    };
    let loaded_empty = move || {
        queue
            .get()
            .is_some_and(|page| page.is_ok_and(|p| p.rows.is_empty()))
    };

    view! {
        <h1>"Unknowns"</h1>
        <p class="muted">
            "Operations whose outcome is unknown: idem never re-sends them. Stuck ones (unknown for more than 15 minutes) come first."
        </p>
        <Show when=move || may_operate>
            <div class="bulk">
                <ConfirmButton
                    label="Reconcile selected"
                    question="Ask each selected operation's provider now whether it happened, and settle it by the answer?".to_owned()
                    on_confirm=on_reconcile
                    disabled=none_chosen
                />
            </div>
        </Show>
        <ReconcileResults results=reconcile.value() />
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || queue.get().and_then(Result::err).map(|error| view! { <ErrorNote error /> })}
            <Show when=loaded_empty>
                <EmptyState title="No unknown operations.">
                    "An operation becomes unknown when a call's outcome could not be learned (a timeout, a lost answer). The reconciler asks the provider in the background; what it cannot settle waits here for you."
                </EmptyState>
            </Show>
            <Show when=move || !rows.read().is_empty()>
                <div class="table-wrap">
                    <table class="unknowns">
                        <thead>
                            <tr>
                                <th scope="col">
                                    <Show when=move || may_operate>
                                        <input
                                            type="checkbox"
                                            aria-label="Select all"
                                            prop:checked=all_selected
                                            on:change=move |ev| toggle_all(event_target_checked(&ev))
                                        />
                                    </Show>
                                </th>
                                <th scope="col">"Status"</th>
                                <th scope="col">"Tool"</th>
                                <th scope="col">"Key"</th>
                                <th scope="col">"Namespace"</th>
                                <th scope="col">"Unknown since"</th>
                                <th scope="col">"Attempts"</th>
                                <th scope="col">"Next attempt"</th>
                                <th scope="col"><span class="visually-hidden">"Details"</span></th>
                            </tr>
                        </thead>
                        <tbody>
                            <For
                                each=move || rows.get()
                                key=|row| (row.id, row.updated_at, row.reconcile_attempts)
                                let:row
                            >
                                <UnknownRow row selected may_operate />
                            </For>
                        </tbody>
                    </table>
                </div>
            </Show>
        </Transition>
    }
}

#[component]
fn UnknownRow(
    row: OperationRow,
    selected: RwSignal<BTreeSet<Uuid>>,
    may_operate: bool,
) -> impl IntoView {
    let id = row.id;
    let stuck = row.is_stuck(use_now().get_untracked());
    let since = row.unknown_since.unwrap_or(row.updated_at);
    let select_label = format!("Select {}", row.key);
    let toggle = move |on: bool| {
        selected.update(|picked| {
            if on {
                picked.insert(id);
            } else {
                picked.remove(&id);
            }
        })
    };
    view! {
        <tr class:stuck=stuck data-key=row.key.clone()>
            <td>
                <Show when=move || may_operate>
                    <input
                        type="checkbox"
                        aria-label=select_label.clone()
                        prop:checked=move || selected.read().contains(&id)
                        on:change=move |ev| toggle(event_target_checked(&ev))
                    />
                </Show>
            </td>
            <td><StatusBadge status=row.status stuck /></td>
            <td>{row.tool.clone()}</td>
            <td><CopyText text=row.key.clone() label="key" /></td>
            <td>{row.namespace.clone()}</td>
            <td><RelativeTime at=since /></td>
            <td>{row.reconcile_attempts}</td>
            <td>
                {match row.next_reconcile_at {
                    Some(at) => view! { <RelativeTime at /> }.into_any(),
                    None => view! { <span class="muted">"none scheduled"</span> }.into_any(),
                }}
            </td>
            <td><A href=format!("/operations/{id}")>"Details"</A></td>
        </tr>
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
