use leptos::prelude::*;
use leptos_router::hooks::use_navigate;

use crate::server_fns::Login;

/// The sign-in form. Once hydrated it submits in the background and moves to the overview.
#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(_)) = login.value().get() {
            navigate("/", Default::default());
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
        <main class="centered">
            <section class="card login">
                <h1 class="brand">"idem"</h1>
                <p class="muted">"The idempotency ledger for tool-calling agents"</p>
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
            </section>
        </main>
    }
}
