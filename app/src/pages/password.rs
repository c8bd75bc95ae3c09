//! One's own password: reached from the header, and the only page open to a person who
//! signed in with a generated password until they choose their own.

use leptos::prelude::*;
use leptos_router::components::{Redirect, A};

use crate::components::ErrorNote;
use crate::server_fns::{current_user, ChangePassword};

#[component]
pub fn PasswordPage() -> impl IntoView {
    let user = Resource::new(|| (), |_| current_user());
    view! {
        <Suspense fallback=|| view! { <p class="muted page">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match user.await {
                    Ok(Some(user)) => view! {
                        <main class="centered">
                            <section class="card login">
                                <h1>"Change your password"</h1>
                                <p class="muted">
                                    {format!("Signed in as {}.", user.username)}
                                </p>
                                {user.must_change_password.then(|| view! {
                                    <p class="warn-note" role="note">
                                        "You signed in with a generated password: choose your own before you go on."
                                    </p>
                                })}
                                <PasswordForm />
                                {(!user.must_change_password).then(|| view! {
                                    <p><A href="/">"Back to the overview"</A></p>
                                })}
                            </section>
                        </main>
                    }
                    .into_any(),
                    Ok(None) => view! { <Redirect path="/login" /> }.into_any(),
                    Err(error) => view! { <ErrorNote error /> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The form: the current password and the new one. Other sessions end; this one stays.
#[island]
fn PasswordForm() -> impl IntoView {
    let change = ServerAction::<ChangePassword>::new();
    Effect::new(move |_| {
        if let Some(Ok(())) = change.value().get() {
            #[cfg(feature = "hydrate")]
            crate::browser::refresh::go("/");
        }
    });
    view! {
        <ActionForm action=change attr:aria-label="Change your password">
            <label>
                "Current password"
                <input type="password" name="current_password" autocomplete="current-password" required />
            </label>
            <label>
                "New password"
                <input type="password" name="new_password" autocomplete="new-password" minlength="8" required />
            </label>
            {move || change.value().get().and_then(Result::err).map(|error| view! { <ErrorNote error /> })}
            <button type="submit" disabled=move || change.pending().get()>"Change password"</button>
        </ActionForm>
    }
}
