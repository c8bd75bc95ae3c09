use leptos::prelude::*;

/// Shown for any path that is not a page.
#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <main class="centered">
            <h1>"Page not found"</h1>
            <p><a href="/">"Back to the overview"</a></p>
        </main>
    }
}
