//! The operations table: every operation, newest first, filtered by what the URL's query
//! string says, so a filtered view is a link a person can share.

use leptos::prelude::*;
use leptos_router::components::{Form, A};
use leptos_router::hooks::use_query_map;

use crate::components::{
    CopyText, EffectBadge, EmptyState, ErrorNote, Frame, RelativeTime, StatusBadge,
};
use crate::domain::OperationStatus;
use crate::operations_filter::OperationsFilter;
use crate::server_fns::{list_operations, OperationsPage as Page};
use crate::views::{OperationRow, StuckAfter};

#[component]
pub fn OperationsPage() -> impl IntoView {
    view! {
        <Frame>
            <Operations />
        </Frame>
    }
}

#[component]
fn Operations() -> impl IntoView {
    let query = use_query_map();
    let filter = Memo::new(move |_| {
        let query = query.read();
        OperationsFilter::from_query(|name| query.get(name))
    });
    let cursor = Memo::new(move |_| query.read().get("cursor").filter(|c| !c.is_empty()));
    let page = Resource::new(
        move || (filter.get(), cursor.get()),
        |(filter, cursor)| list_operations(filter, cursor, false),
    );

    view! {
        <div class="heading-row">
            <h1>"Operations"</h1>
        </div>
        {move || view! { <FilterForm filter=filter.get() /> }}
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(page) => {
                        view! { <Table page filter=filter.get_untracked() paged=cursor.get_untracked().is_some() /> }
                            .into_any()
                    }
                    Err(error) => view! { <ErrorNote error /> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The filter as a plain GET form: it works before hydration and puts the filter in the URL.
#[component]
fn FilterForm(filter: OperationsFilter) -> impl IntoView {
    let chosen = filter.status.clone();
    let since = OperationsFilter::time_field_value(&filter.since);
    let until = OperationsFilter::time_field_value(&filter.until);
    let export = filter.export_href();
    let stuck_only = filter.stuck_only();
    view! {
        <Form method="GET" action="/operations" attr:class="filters" attr:aria-label="Filter operations">
            <label>
                "Status"
                <select name="status">
                    <option value="" selected=chosen.is_empty()>"any"</option>
                    {OperationStatus::ALL
                        .iter()
                        .map(|status| {
                            let name = status.as_str();
                            view! {
                                <option value=name selected=chosen == name>
                                    {name.replace('_', " ")}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </label>
            <label>"Tool" <input name="tool" value=filter.tool placeholder="refund" /></label>
            <label>
                "Namespace"
                <input name="namespace" value=filter.namespace placeholder="support-bot" />
            </label>
            <label>"Run id" <input name="run_id" value=filter.run_id /></label>
            <label>"Key contains" <input name="key" type="search" value=filter.key /></label>
            <label>
                "Created from (UTC)"
                <input name="since" type="datetime-local" step="1" value=since />
            </label>
            <label>
                "Created before (UTC)"
                <input name="until" type="datetime-local" step="1" value=until />
            </label>
            <label class="checkbox">
                <input name="stuck" type="checkbox" value="true" checked=stuck_only />
                "Stuck only"
            </label>
            <div class="filter-buttons">
                <button type="submit">"Filter"</button>
                <A href="/operations" attr:class="clear">"Clear"</A>
                <a href=export download rel="external">"Export CSV"</a>
            </div>
        </Form>
    }
}

#[component]
fn Table(page: Page, filter: OperationsFilter, paged: bool) -> impl IntoView {
    if page.rows.is_empty() {
        return view! { <NoOperations filtered=!filter.is_empty() || paged /> }.into_any();
    }
    let older = page.next_cursor.map(|cursor| filter.href(Some(&cursor)));
    let newest = paged.then(|| filter.href(None));
    view! {
        <div class="table-wrap">
            <table class="operations cards">
                <thead>
                    <tr>
                        <th scope="col">"Status"</th>
                        <th scope="col">"Tool"</th>
                        <th scope="col">"Key"</th>
                        <th scope="col">"Namespace"</th>
                        <th scope="col">"Run / step"</th>
                        <th scope="col">"Attempt"</th>
                        <th scope="col">"Created"</th>
                    </tr>
                </thead>
                <tbody>
                    {page
                        .rows
                        .into_iter()
                        .map(|row| view! { <Row row stuck_after=page.stuck_after /> })
                        .collect_view()}
                </tbody>
            </table>
        </div>
        <nav class="pager" aria-label="Pages">
            {newest.map(|href| view! { <A href=href>"← Newest"</A> })}
            {older.map(|href| view! { <A href=href attr:rel="next">"Older →"</A> })}
        </nav>
    }
    .into_any()
}

#[component]
fn Row(row: OperationRow, stuck_after: StuckAfter) -> impl IntoView {
    let stuck = row.is_stuck(chrono::Utc::now(), stuck_after);
    let href = format!("/operations/{}", row.id);
    let run = match (&row.run_id, row.step) {
        (Some(run), Some(step)) => format!("{run} / {step}"),
        (Some(run), None) => run.clone(),
        (None, Some(step)) => format!("— / {step}"),
        (None, None) => "—".to_owned(),
    };
    view! {
        <tr class:stuck=stuck data-id=row.id.to_string() data-morph-key=row.id.to_string()>
            // `data-label`: on a phone each row is a card and each cell says what it is.
            <td data-label="Status"><StatusBadge status=row.status stuck /></td>
            <td data-label="Tool">
                <a href=href class="op-link">{row.tool}</a>
                " "
                <EffectBadge effect=row.effect />
            </td>
            <td data-label="Key" class="key"><CopyText text=row.key label="key" truncate=true /></td>
            <td data-label="Namespace">{row.namespace}</td>
            <td data-label="Run / step">{run}</td>
            <td data-label="Attempt">{row.attempt}</td>
            <td data-label="Created"><RelativeTime at=row.created_at /></td>
        </tr>
    }
}

#[component]
fn NoOperations(filtered: bool) -> impl IntoView {
    if filtered {
        view! {
            <EmptyState title="No operations match this filter">
                <A href="/operations">"Clear the filter"</A>
                " to see every operation."
            </EmptyState>
        }
        .into_any()
    } else {
        view! {
            <EmptyState title="No operations yet">
                "Agents create operations with " <code>"POST /v1/operations"</code>
                " (or " <code>"POST /v1/tools/{name}/invoke"</code> "); they appear here as they happen."
            </EmptyState>
        }
        .into_any()
    }
}
