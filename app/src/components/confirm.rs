//! Actions that change the ledger sit behind a confirmation that says what will happen and,
//! where the server needs one, asks for a reason.

use leptos::prelude::*;

/// Whether the confirmation asks for a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reason {
    #[default]
    None,
    Optional,
    Required,
}

/// A button that opens an inline confirmation; `on_confirm` receives the reason (empty when
/// none was asked for or given).
#[component]
pub fn ConfirmButton(
    /// The button's text, also the confirm button's text.
    label: &'static str,
    /// What will happen, in one sentence.
    question: String,
    on_confirm: Callback<String>,
    #[prop(optional)] reason: Reason,
    #[prop(optional)] danger: bool,
    #[prop(optional, into)] disabled: Signal<bool>,
    /// Whether the confirmation is open, when a page keeps it across re-renders (a live
    /// refetch redraws the page; an open confirmation and its typed reason should survive).
    #[prop(optional)]
    open: Option<RwSignal<bool>>,
    /// The reason typed so far, kept by the page for the same purpose.
    #[prop(optional)]
    text: Option<RwSignal<String>>,
) -> impl IntoView {
    let open = open.unwrap_or_else(|| RwSignal::new(false));
    let text = text.unwrap_or_else(|| RwSignal::new(String::new()));
    let missing_reason = move || reason == Reason::Required && text.read().trim().is_empty();
    let confirm = move |_| {
        on_confirm.run(text.get_untracked().trim().to_owned());
        open.set(false);
        text.set(String::new());
    };
    view! {
        <span class="confirm">
            <button
                type="button"
                class:danger=danger
                class:secondary=!danger
                disabled=move || disabled.get()
                on:click=move |_| open.set(true)
            >
                {label}
            </button>
            <Show when=move || open.get()>
                <div class="confirm-panel" role="dialog" aria-modal="false" aria-label=label>
                    <p>{question.clone()}</p>
                    <Show when=move || reason != Reason::None>
                        <label>
                            {if reason == Reason::Required { "Reason (required)" } else { "Reason (optional)" }}
                            <textarea
                                rows="2"
                                prop:value=move || text.get()
                                on:input=move |ev| text.set(event_target_value(&ev))
                            ></textarea>
                        </label>
                    </Show>
                    <div class="buttons">
                        <button
                            type="button"
                            class:danger=danger
                            disabled=missing_reason
                            on:click=confirm
                        >
                            {format!("Confirm: {label}")}
                        </button>
                        <button type="button" class="secondary" on:click=move |_| open.set(false)>
                            "Cancel"
                        </button>
                    </div>
                </div>
            </Show>
        </span>
    }
}
