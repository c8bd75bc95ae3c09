//! The overview: what idem prevented and what waits for people, over 1 h, 24 h or 7 d.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::overview_tools::ToolsTable;
use crate::components::{chart_time, zone_note, ErrorNote, Frame};
use crate::server_fns::{overview, tools_overview, WINDOWS};
use crate::views::{ChartView, OverviewView};

#[component]
pub fn OverviewPage() -> impl IntoView {
    view! {
        <Frame>
            <Overview />
        </Frame>
    }
}

#[component]
fn Overview() -> impl IntoView {
    let query = use_query_map();
    let window = Memo::new(move |_| {
        query
            .read()
            .get("window")
            .filter(|w| WINDOWS.contains(&w.as_str()))
            .unwrap_or_else(|| "24h".to_owned())
    });
    let numbers = Resource::new(move || window.get(), overview);
    let tools = Resource::new(move || window.get(), tools_overview);

    view! {
        <div class="heading-row">
            <h1>"Overview"</h1>
            <nav class="windows" aria-label="Window">
                {WINDOWS
                    .iter()
                    .map(|w| {
                        let current = move || window.get() == *w;
                        view! {
                            // A plain link: the router's <A> marks every link to `/` as the
                            // current page, whatever its query.
                            <a
                                href=format!("/?window={w}")
                                class=move || if current() { "window current" } else { "window" }
                                aria-current=move || current().then_some("true")
                            >
                                {*w}
                            </a>
                        }
                    })
                    .collect_view()}
            </nav>
        </div>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match numbers.await {
                    Ok(numbers) => view! { <Numbers numbers /> }.into_any(),
                    Err(error) => view! { <ErrorNote error /> }.into_any(),
                }
            })}
        </Transition>
        <Transition fallback=|| ()>
            {move || Suspend::new(async move {
                match tools.await {
                    Ok(table) => view! { <ToolsTable table /> }.into_any(),
                    Err(error) => view! { <ErrorNote error /> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Numbers(numbers: OverviewView) -> impl IntoView {
    let latency = |ms: Option<u64>| ms.map_or("—".to_owned(), |ms| format!("{ms} ms"));
    let stuck = numbers.stuck_unknown > 0;
    let waiting = numbers.awaiting_approval > 0;
    let breakdown = format!(
        "{} in flight (409) · {} mismatches (422)",
        numbers.in_flight_rejected, numbers.mismatches_rejected
    );
    view! {
        <section class="tiles" aria-label="Numbers">
            <Tile name="Duplicates prevented" value=numbers.duplicates_prevented.to_string() note=breakdown />
            <Tile
                name="Unknown now"
                value=numbers.unknown_now.to_string()
                note=format!("{} stuck (> {})", numbers.stuck_unknown, numbers.stuck_after.words())
                alert=stuck
                href="/unknowns"
            />
            <Tile
                name="Stuck unknowns"
                value=numbers.stuck_unknown.to_string()
                note=format!("unknown for more than {}", numbers.stuck_after.words())
                alert=stuck
                href="/unknowns"
            />
            <Tile
                name="Awaiting approval"
                value=numbers.awaiting_approval.to_string()
                note="irreversible actions waiting for a person".to_owned()
                alert=waiting
                href="/approvals"
            />
            <Tile
                name="Reconciliation latency"
                value=format!("p50 {}", latency(numbers.latency_p50_ms))
                note=format!("p95 {} · {} reconciled", latency(numbers.latency_p95_ms), numbers.reconciliations)
            />
            <Tile
                name="Manual interventions"
                value=numbers.manual_interventions.to_string()
                note="resolved or expired by a person".to_owned()
            />
        </section>
        <section class="charts" aria-label="Charts">
            {numbers.charts.into_iter().map(|chart| view! { <Chart chart /> }).collect_view()}
        </section>
        // The browser says which zone the charts show once it has rewritten their times.
        <p class="chart-times muted" data-chart-times="">{zone_note(0)}</p>
    }
}

#[component]
fn Tile(
    name: &'static str,
    value: String,
    note: String,
    #[prop(optional)] alert: bool,
    #[prop(optional)] href: Option<&'static str>,
) -> impl IntoView {
    let body = view! {
        <span class="tile-name">{name}</span>
        <strong class="tile-value" data-testid=format!("tile-{}", name.to_lowercase().replace(' ', "-"))>{value}</strong>
        <span class="tile-note">{note}</span>
    };
    match href {
        Some(href) => view! { <a class="tile" class:alert=alert href=href>{body}</a> }.into_any(),
        None => view! { <div class="tile" class:alert=alert>{body}</div> }.into_any(),
    }
}

/// A server-drawn chart: its legend above the plot (never over the data), the plot with a
/// `<title>` per bucket for hover, and the same numbers as a table for screen readers and
/// for copying. Times are UTC as rendered; `crate::browser::local_time` shows them in the
/// viewer's zone.
#[component]
fn Chart(chart: ChartView) -> impl IntoView {
    let caption = if chart.unit.is_empty() {
        chart.title.clone()
    } else {
        format!("{} ({})", chart.title, chart.unit)
    };
    view! {
        <figure class="chart" data-chart=chart.id.clone()>
            <figcaption>{caption}</figcaption>
            <ul class="legend" aria-label="Series">
                {chart
                    .legend
                    .into_iter()
                    .map(|entry| {
                        let mark = format!(
                            "swatch hue-{} {}",
                            entry.hue,
                            if entry.bar { "bar" } else { "line" },
                        );
                        view! { <li><span class=mark aria-hidden="true"></span>{entry.name}</li> }
                    })
                    .collect_view()}
            </ul>
            <div class="chart-body" inner_html=chart.drawing></div>
            <details>
                <summary>"Show as a table"</summary>
                <div class="table-wrap">
                    <table>
                        <caption class="visually-hidden">{chart.title}</caption>
                        <thead>
                            <tr>{chart.columns.into_iter().map(|c| view! { <th scope="col">{c}</th> }).collect_view()}</tr>
                        </thead>
                        <tbody>
                            {chart
                                .rows
                                .into_iter()
                                .map(|row| {
                                    view! {
                                        <tr>
                                            <td><BucketTime at=row.at /></td>
                                            {row.values.into_iter().map(|v| view! { <td>{v}</td> }).collect_view()}
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                </div>
            </details>
        </figure>
    }
}

/// A bucket's start in UTC; the browser rewrites it to local time (`data-local`).
#[component]
fn BucketTime(at: chrono::DateTime<chrono::Utc>) -> impl IntoView {
    view! {
        <time datetime=at.to_rfc3339() data-local="datetime">
            {format!("{} UTC", chart_time(at.naive_utc(), "datetime"))}
        </time>
    }
}
