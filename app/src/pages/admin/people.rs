//! What an admin does to one person from the People table: change their role, disable or
//! enable them, delete them (behind a confirmation). The server refuses taking away the last
//! enabled admin; the refusal shows beside the buttons.

use leptos::prelude::*;
use uuid::Uuid;

use crate::components::{show_changes_when, ConfirmButton, ErrorNote};
use crate::domain::Role;
use crate::server_fns::{DeleteUser, UpdateUser};

/// The actions of one person's row.
#[island]
pub fn PersonActions(id: Uuid, username: String, role: Role, disabled: bool) -> impl IntoView {
    let update = ServerAction::<UpdateUser>::new();
    let delete = ServerAction::<DeleteUser>::new();
    show_changes_when(move || {
        matches!(update.value().get(), Some(Ok(_))) || matches!(delete.value().get(), Some(Ok(_)))
    });
    let chosen = RwSignal::new(role.as_str().to_owned());
    let busy = Signal::derive(move || update.pending().get() || delete.pending().get());
    let set_disabled = move |disabled: bool| {
        update.dispatch(UpdateUser {
            id,
            disabled: Some(disabled),
            role: None,
        });
    };
    let on_disable = Callback::new(move |_reason: String| set_disabled(true));
    let on_delete = Callback::new(move |_reason: String| {
        delete.dispatch(DeleteUser { id });
    });
    let error = move || {
        let failed = |value: Option<Result<_, crate::UiError>>| value.and_then(Result::err);
        failed(update.value().get().map(|r| r.map(|_| ()))).or_else(|| failed(delete.value().get()))
    };
    view! {
        <span class="person-actions">
            <select
                aria-label=format!("Role of {username}")
                on:change=move |event| chosen.set(event_target_value(&event))
                prop:value=move || chosen.get()
            >
                {Role::ALL
                    .into_iter()
                    .map(|option| view! {
                        <option value=option.as_str() selected=option == role>{option.as_str()}</option>
                    })
                    .collect_view()}
            </select>
            <button
                type="button"
                class="secondary"
                disabled=move || busy.get() || chosen.get() == role.as_str()
                on:click=move |_| {
                    update.dispatch(UpdateUser {
                        id,
                        disabled: None,
                        role: Some(chosen.get_untracked()),
                    });
                }
            >
                "Change role"
            </button>
            {if disabled {
                view! {
                    <button
                        type="button"
                        class="secondary"
                        disabled=move || busy.get()
                        on:click=move |_| set_disabled(false)
                    >
                        "Enable"
                    </button>
                }
                    .into_any()
            } else {
                view! {
                    <ConfirmButton
                        label="Disable"
                        question=format!(
                            "Disable {username}? Their sessions end at once and they cannot sign in until enabled again."
                        )
                        on_confirm=on_disable
                        disabled=busy
                    />
                }
                    .into_any()
            }}
            <ConfirmButton
                label="Delete"
                question=format!(
                    "Delete {username}? Their sessions end at once; the audit log keeps their name."
                )
                on_confirm=on_delete
                danger=true
                disabled=busy
            />
            {move || error().map(|error| view! { <ErrorNote error /> })}
        </span>
    }
}
