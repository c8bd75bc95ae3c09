//! The frame of every signed-in page: it checks the session, sends strangers to the login
//! page, shows the navigation, and tells the page who is looking.

use leptos::prelude::*;
use leptos_router::components::{Redirect, A};

use super::live::LiveIndicator;
use crate::domain::{Permission, UserInfo};
use crate::server_fns::{current_user, logout, waiting_approvals, WAITING_SHOWN_UP_TO};

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
                    // A generated password is changed before anything else.
                    Ok(Some(user)) if user.must_change_password => {
                        view! { <Redirect path="/password" /> }.into_any()
                    }
                    Ok(Some(user)) => {
                        provide_context(Viewer(user.clone()));
                        let waiting = waiting_for(&user).await;
                        view! {
                            <TopBar user waiting />
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

/// Requests waiting for `user` to decide them; 0 for people who may not decide (or when the
/// count fails: the header is no place for that error).
async fn waiting_for(user: &UserInfo) -> u32 {
    if !user.role.can(Permission::Approve) {
        return 0;
    }
    waiting_approvals().await.unwrap_or(0)
}

/// The header's count of waiting requests; none when nothing waits. The frame is drawn on
/// the server, so the live refresh (which fetches the page again after each change) keeps
/// it current without code in the browser.
#[component]
fn WaitingCount(waiting: u32) -> impl IntoView {
    let shown = if waiting > WAITING_SHOWN_UP_TO {
        format!("{WAITING_SHOWN_UP_TO}+")
    } else {
        waiting.to_string()
    };
    (waiting > 0).then(|| {
        view! {
            " "
            <span
                class="count-badge"
                data-testid="waiting-approvals"
                aria-label=format!("{shown} waiting for approval")
            >
                {shown.clone()}
            </span>
        }
    })
}

#[component]
fn TopBar(user: UserInfo, waiting: u32) -> impl IntoView {
    let admin = user.role.can(Permission::Administer);

    view! {
        <header class="topbar">
            <A href="/" attr:class="brand">"idem"</A>
            <nav aria-label="Main" class="main-nav">
                <A href="/" exact=true>"Overview"</A>
                <A href="/operations">"Operations"</A>
                <A href="/approvals">"Approvals" <WaitingCount waiting /></A>
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
                <A href="/password" attr:class="account-link">"Password"</A>
                <SignOut />
            </div>
        </header>
    }
}

/// Ends the session and goes to the login page.
#[island]
fn SignOut() -> impl IntoView {
    let sign_out = Action::new(|_: &()| logout());
    Effect::new(move |_| {
        if let Some(Ok(())) = sign_out.value().get() {
            #[cfg(feature = "hydrate")]
            let _ = window().location().assign("/login");
        }
    });
    view! {
        <button
            type="button"
            class="secondary"
            disabled=move || sign_out.pending().get()
            on:click=move |_| {
                sign_out.dispatch(());
            }
        >
            "Sign out"
        </button>
    }
}

/// Sets `data-hydrated` on `<html>` once the islands before it have hydrated (the islands
/// script hydrates them in document order, and this one comes last): tests wait for it
/// before they click. Being on every page once, it also starts what the whole page shares:
/// the Copy buttons' listener and chart times in the viewer's zone.
#[island]
pub fn Hydrated() -> impl IntoView {
    #[cfg(feature = "hydrate")]
    {
        crate::browser::copy::listen();
        crate::browser::local_time::listen();
    }
    Effect::new(|_| {
        if let Some(root) = document().document_element() {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    });
}
