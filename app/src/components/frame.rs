//! The frame of every signed-in page: it checks the session, sends strangers to the login
//! page, shows the navigation, and tells the page who is looking.

use leptos::prelude::*;
use leptos_router::components::{Redirect, A};
use leptos_router::hooks::use_navigate;

use super::live::{use_live, LiveIndicator};
use crate::domain::{Permission, UserInfo};
use crate::server_fns::{current_user, Logout};

/// The person looking at the page, for pages that show actions by role. The server checks
/// the role again on every action; this only decides what is drawn.
#[derive(Debug, Clone)]
pub struct Viewer(pub UserInfo);

impl Viewer {
    /// Whether the role carries `permission`.
    pub fn may(&self, permission: Permission) -> bool {
        self.0.role.can(permission)
    }
}

/// The viewer of the current page (inside a [`Frame`]).
pub fn use_viewer() -> Viewer {
    expect_context::<Viewer>()
}

/// Wraps a page: once the session is confirmed, the top bar and `children`; without a
/// session, a redirect to `/login` (a real HTTP redirect when rendered on the server).
#[component]
pub fn Frame(children: ChildrenFn) -> impl IntoView {
    let user = Resource::new(|| (), |_| current_user());
    let children = StoredValue::new(children);
    view! {
        <Suspense fallback=|| view! { <p class="muted page">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match user.await {
                    Ok(Some(user)) => {
                        provide_context(Viewer(user.clone()));
                        use_live().signed_in();
                        view! {
                            <TopBar user />
                            <main class="page">{children.read_value()()}</main>
                        }
                            .into_any()
                    }
                    Ok(None) => view! { <Redirect path="/login" /> }.into_any(),
                    Err(error) => {
                        view! { <p class="error page" role="alert">{error.to_string()}</p> }
                            .into_any()
                    }
                }
            })}
        </Suspense>
    }
}

#[component]
fn TopBar(user: UserInfo) -> impl IntoView {
    let logout = ServerAction::<Logout>::new();
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(())) = logout.value().get() {
            navigate("/login", Default::default());
        }
    });
    let admin = user.role.can(Permission::Administer);

    view! {
        <header class="topbar">
            <A href="/" attr:class="brand">"idem"</A>
            <nav aria-label="Main" class="main-nav">
                <A href="/" exact=true>"Overview"</A>
                <A href="/operations">"Operations"</A>
                <A href="/approvals">"Approvals"</A>
                <A href="/unknowns">"Unknowns"</A>
                <A href="/tools">"Tools"</A>
                <Show when=move || admin>
                    <A href="/admin">"Admin"</A>
                </Show>
            </nav>
            <div class="account">
                <LiveIndicator />
                <span class="who">
                    "Signed in as " <strong>{user.username.to_string()}</strong>
                    <span class="badge">{user.role.as_str()}</span>
                </span>
                <ActionForm action=logout>
                    <button type="submit" class="secondary">"Sign out"</button>
                </ActionForm>
            </div>
        </header>
    }
}
