//! The HTML document and the router.

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{ParamSegment, SsrMode, StaticSegment};

use crate::components::Hydrated;
use crate::pages::{
    AdminPage, ApprovalPage, ApprovalsPage, LoginPage, NotFound, OperationPage, OperationsPage,
    OverviewPage, PasswordPage, ToolsPage, UnknownsPage,
};

/// The whole document, rendered on the server around the app.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <meta name="color-scheme" content="light dark" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <HydrationScripts options islands=true />
                <MetaTags />
            </head>
            <body>
                <App />
                <Hydrated />
            </body>
        </html>
    }
}

/// The application: its routes, rendered on the server (the interactive parts are islands).
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();

    view! {
        <Stylesheet id="leptos" href="/pkg/idem.css" />
        <Title text="idem" />
        <Router>
            <Routes fallback=NotFound>
                // Async: a page waits for the session check, so a redirect to the login
                // page is a real HTTP redirect rather than a flash of content.
                <Route path=StaticSegment("") view=OverviewPage ssr=SsrMode::Async />
                <Route path=StaticSegment("operations") view=OperationsPage ssr=SsrMode::Async />
                <Route
                    path=(StaticSegment("operations"), ParamSegment("id"))
                    view=OperationPage
                    ssr=SsrMode::Async
                />
                <Route path=StaticSegment("approvals") view=ApprovalsPage ssr=SsrMode::Async />
                <Route
                    path=(StaticSegment("approvals"), ParamSegment("id"))
                    view=ApprovalPage
                    ssr=SsrMode::Async
                />
                <Route path=StaticSegment("unknowns") view=UnknownsPage ssr=SsrMode::Async />
                <Route path=StaticSegment("tools") view=ToolsPage ssr=SsrMode::Async />
                <Route path=StaticSegment("admin") view=AdminPage ssr=SsrMode::Async />
                <Route path=StaticSegment("password") view=PasswordPage ssr=SsrMode::Async />
                <Route path=StaticSegment("login") view=LoginPage />
            </Routes>
        </Router>
    }
}
