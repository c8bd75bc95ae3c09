use leptos::prelude::*;

use crate::server_fns::Login;

#[component]
pub fn LoginPage() -> impl IntoView {
    view! {
        <main class="centered">
            <section class="card login">
                <h1 class="brand">"idem"</h1>
                <p class="muted">"The idempotency ledger for tool-calling agents"</p>
                <LoginForm />
            </section>
        </main>
    }
}

/// The sign-in form. Once hydrated it submits in the background and moves to the overview
/// without a reload.
#[island]
fn LoginForm() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    Effect::new(move |_| {
        if let Some(Ok(_)) = login.value().get() {
            #[cfg(feature = "hydrate")]
            crate::browser::refresh::go("/");
        }
    });
    let error = move || {
        login
            .value()
            .get()
            .and_then(Result::err)
            .map(|e| e.to_string())
    };

    view! {
                <ActionForm action=login>
                    <label>
                        "Username"
                        <input name="username" autocomplete="username" required autofocus />
                    </label>
                    <label>
                        "Password"
                        <input type="password" name="password" autocomplete="current-password" required />
                    </label>
                    <Show when=move || error().is_some()>
                        <p class="error" role="alert">{error}</p>
                    </Show>
                    <button type="submit" disabled=move || login.pending().get()>"Sign in"</button>
                </ActionForm>
    }
}
