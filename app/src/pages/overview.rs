use leptos::prelude::*;
use leptos_router::components::Redirect;
use leptos_router::hooks::use_navigate;

use crate::domain::UserInfo;
use crate::server_fns::{current_user, Logout};

/// The overview: for now, who is signed in and a way out. People who are not signed in are
/// sent to the login page.
#[component]
pub fn OverviewPage() -> impl IntoView {
    let user = Resource::new(|| (), |_| current_user());
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match user.await {
                    Ok(Some(user)) => view! { <SignedIn user /> }.into_any(),
                    Ok(None) => view! { <Redirect path="/login" /> }.into_any(),
                    Err(error) => view! { <p class="error" role="alert">{error.to_string()}</p> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn SignedIn(user: UserInfo) -> impl IntoView {
    let logout = ServerAction::<Logout>::new();
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(())) = logout.value().get() {
            navigate("/login", Default::default());
        }
    });

    view! {
        <header class="topbar">
            <span class="brand">"idem"</span>
            <nav aria-label="Account">
                <span class="who">
                    "Signed in as " <strong>{user.username.to_string()}</strong>
                    <span class="badge">{user.role.as_str()}</span>
                </span>
                <ActionForm action=logout>
                    <button type="submit" class="secondary">"Sign out"</button>
                </ActionForm>
            </nav>
        </header>
        <main class="page">
            <h1>"Overview"</h1>
            <p class="muted">
                "Operations, approvals and reconciliation will appear here as agents use idem."
            </p>
        </main>
    }
}
