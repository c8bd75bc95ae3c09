//! The overview's table by namespace and tool: where the trouble is, each number a link to
//! the operations it counts (as near as the list's filters can say).

use leptos::prelude::*;

use crate::operations_filter::OperationsFilter;
use crate::views::{form_time_value, ToolRow, ToolTable};

/// Which operations a number of a row stands for.
#[derive(Clone, Copy)]
enum Counted {
    /// Created in the window (also the nearest view of its duplicates and latency).
    InWindow,
    Failed,
    Unknown,
    Stuck,
    AwaitingApproval,
}

/// The operations list filtered to what `counted` counts for `row`.
fn list_href(row: &ToolRow, from: &str, counted: Counted) -> String {
    let mut filter = OperationsFilter {
        namespace: row.namespace.clone(),
        tool: row.tool.clone(),
        ..OperationsFilter::default()
    };
    match counted {
        Counted::InWindow => filter.since = from.to_owned(),
        Counted::Failed => {
            filter.since = from.to_owned();
            filter.status = "failed".to_owned();
        }
        Counted::Unknown => filter.status = "unknown".to_owned(),
        Counted::Stuck => filter.stuck = "true".to_owned(),
        Counted::AwaitingApproval => filter.status = "awaiting_approval".to_owned(),
    }
    filter.href(None)
}

#[component]
pub fn ToolsTable(table: ToolTable) -> impl IntoView {
    if table.rows.is_empty() {
        return view! {
            <section class="by-tool" aria-labelledby="by-tool-title">
                <h2 id="by-tool-title">"By tool"</h2>
                <p class="muted">"No tool was used in this window and nothing waits."</p>
            </section>
        }
        .into_any();
    }
    let from = form_time_value(table.from);
    view! {
        <section class="by-tool" aria-labelledby="by-tool-title">
            <h2 id="by-tool-title">"By tool"</h2>
            <div class="table-wrap">
                <table class="by-tool">
                    <thead>
                        <tr>
                            <th scope="col">"Namespace"</th>
                            <th scope="col">"Tool"</th>
                            <th scope="col" class="num">"Operations"</th>
                            <th scope="col" class="num">"Duplicates prevented"</th>
                            <th scope="col" class="num">"Failures"</th>
                            <th scope="col" class="num">"Unknown now"</th>
                            <th scope="col" class="num">"Stuck"</th>
                            <th scope="col" class="num">"Awaiting approval"</th>
                            <th scope="col" class="num">"p95 reconciliation"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {table
                            .rows
                            .into_iter()
                            .map(|row| view! { <Row row from=from.clone() /> })
                            .collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
    .into_any()
}

#[component]
fn Row(row: ToolRow, from: String) -> impl IntoView {
    let cell = |label: &'static str, count: u64, counted: Counted, alert: bool| {
        let href = list_href(&row, &from, counted);
        let alert = alert && count > 0;
        view! {
            <td class="num" class:alert=alert data-label=label>
                <a href=href>{count}</a>
            </td>
        }
    };
    let p95 = row
        .reconciliation_p95_ms
        .map_or("—".to_owned(), |ms| format!("{ms} ms"));
    let window_href = list_href(&row, &from, Counted::InWindow);
    view! {
        <tr data-namespace=row.namespace.clone() data-tool=row.tool.clone()>
            <td data-label="Namespace">{row.namespace.clone()}</td>
            <th scope="row" data-label="Tool">{row.tool.clone()}</th>
            {cell("Operations", row.operations, Counted::InWindow, false)}
            {cell("Duplicates prevented", row.duplicates_prevented, Counted::InWindow, false)}
            {cell("Failures", row.failures, Counted::Failed, true)}
            {cell("Unknown now", row.unknown_now, Counted::Unknown, false)}
            {cell("Stuck", row.stuck_unknown, Counted::Stuck, true)}
            {cell("Awaiting approval", row.awaiting_approval, Counted::AwaitingApproval, false)}
            <td class="num" data-label="p95 reconciliation"><a href=window_href>{p95}</a></td>
        </tr>
    }
}
