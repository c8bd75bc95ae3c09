//! People's actions on one operation: approve, reject, reconcile, resolve and force-expire,
//! each drawn only when the viewer's role allows it and the status fits, each behind a
//! confirmation. The server checks both again.
//!
//! The actions are an island. When the page is fetched again (a change, or an action's own
//! effect) an island whose props are unchanged is kept, so what a person is in the middle of
//! (an open confirmation, a typed reason, the resolve form, the last refusal) survives; a
//! new status brings a new island.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{show_changes, ConfirmButton, ErrorNote, Reason, Viewer};
use crate::domain::{OperationStatus, Outcome, Permission};
use crate::server_fns::{
    approve_operation, expire_operation, reconcile_operation, reject_operation, resolve_operation,
};
use crate::views::OperationRow;
use crate::UiError;

/// What a person asked for, with what they typed.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    Approve { reason: String },
    Reject { reason: String },
    Reconcile,
    Resolve(Resolution),
    Expire { reason: String },
}

/// A manual outcome as typed into the resolve form.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub outcome: Outcome,
    /// The result (succeeded) or error (failed) as JSON text; empty for none.
    pub json: String,
    pub retryable: bool,
    pub reason: String,
}

/// `None` for a blank text, so the server sees "no reason" rather than an empty one.
fn given(text: String) -> Option<String> {
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

async fn perform(id: Uuid, act: Act) -> Result<OperationRow, UiError> {
    match act {
        Act::Approve { reason } => approve_operation(id, given(reason)).await,
        Act::Reject { reason } => reject_operation(id, given(reason)).await,
        Act::Reconcile => reconcile_operation(id).await,
        Act::Expire { reason } => expire_operation(id, given(reason)).await,
        Act::Resolve(resolution) => {
            let (result, error) = match resolution.outcome {
                Outcome::Succeeded => (given(resolution.json), None),
                Outcome::Failed => (None, given(resolution.json)),
            };
            let retryable = resolution.outcome == Outcome::Failed && resolution.retryable;
            resolve_operation(
                id,
                resolution.outcome,
                result,
                error,
                retryable,
                given(resolution.reason),
            )
            .await
        }
    }
}

/// An open-or-closed confirmation and the reason typed into it.
#[derive(Debug, Clone, Copy)]
struct Confirmation {
    open: RwSignal<bool>,
    text: RwSignal<String>,
}

impl Confirmation {
    fn new() -> Self {
        Self {
            open: RwSignal::new(false),
            text: RwSignal::new(String::new()),
        }
    }
}

/// The resolve form's fields.
#[derive(Debug, Clone, Copy)]
struct ResolveForm {
    shown: RwSignal<bool>,
    succeeded: RwSignal<bool>,
    json: RwSignal<String>,
    retryable: RwSignal<bool>,
    confirm: Confirmation,
}

/// What the viewer's role allows, handed to islands (which cannot ask the server's context).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permitted {
    pub approve: bool,
    pub operate: bool,
}

impl Permitted {
    pub fn of(viewer: &Viewer) -> Self {
        Self {
            approve: viewer.may(Permission::Approve),
            operate: viewer.may(Permission::Operate),
        }
    }
}

/// The actions' state: the last action and what is open or typed.
#[derive(Clone, Copy)]
struct ActionsState {
    action: Action<(Uuid, Act), Result<OperationRow, UiError>>,
    approve: Confirmation,
    reject: Confirmation,
    reconcile: Confirmation,
    expire: Confirmation,
    resolve: ResolveForm,
}

impl ActionsState {
    fn new() -> Self {
        Self {
            action: Action::new(|(id, act): &(Uuid, Act)| {
                let (id, act) = (*id, act.clone());
                async move {
                    let answer = perform(id, act).await;
                    // A refusal usually means the page is stale (someone acted first): it
                    // is fetched again either way, and the refusal is carried to the island
                    // that replaces this one; a success drops an earlier refusal, which
                    // would otherwise surface in the next island.
                    match &answer {
                        Err(error) => refusals::keep(id, error.clone()),
                        Ok(_) => refusals::forget(id),
                    }
                    show_changes();
                    answer
                }
            }),
            approve: Confirmation::new(),
            reject: Confirmation::new(),
            reconcile: Confirmation::new(),
            expire: Confirmation::new(),
            resolve: ResolveForm {
                shown: RwSignal::new(false),
                succeeded: RwSignal::new(true),
                json: RwSignal::new(String::new()),
                retryable: RwSignal::new(false),
                confirm: Confirmation::new(),
            },
        }
    }

    fn run(&self, id: Uuid, act: Act) {
        self.action.dispatch((id, act));
    }
}

/// The buttons that fit the viewer's role and the operation's status, and the server's
/// answer to the last one pressed.
#[island]
pub fn OperationActions(id: Uuid, status: OperationStatus, permitted: Permitted) -> impl IntoView {
    let state = ActionsState::new();
    let approve = permitted.approve && status == OperationStatus::AwaitingApproval;
    let operate = permitted.operate;
    let reconcile = operate && status == OperationStatus::Unknown;
    let resolve = operate && matches!(status, OperationStatus::Pending | OperationStatus::Unknown);
    let expire = operate && status.is_final();
    let busy = state.action.pending();
    // A refusal the previous island of this operation met, before the page was fetched
    // again (set once hydrated, so hydration sees what the server drew).
    let carried = RwSignal::new(None::<UiError>);
    Effect::new(move |_| carried.set(refusals::take(id)));
    let refusal = move || match state.action.value().get() {
        Some(Err(error)) => Some(view! { <ErrorNote error /> }),
        Some(Ok(_)) => None,
        None => carried.get().map(|error| view! { <ErrorNote error /> }),
    };
    if !(approve || reconcile || resolve || expire) {
        return view! { {refusal} }.into_any();
    }
    view! {
        <section class="actions" aria-label="Actions">
            {approve.then(|| view! {
                <ConfirmButton
                    label="Approve"
                    question="Approve this operation? The agent's next claim with the same key and arguments runs it.".to_owned()
                    reason=Reason::Optional
                    disabled=busy
                    open=state.approve.open
                    text=state.approve.text
                    on_confirm=Callback::new(move |reason| state.run(id, Act::Approve { reason }))
                />
                <ConfirmButton
                    label="Reject"
                    question="Reject this operation? The agent's claims with this key get the rejection and your reason.".to_owned()
                    reason=Reason::Required
                    danger=true
                    disabled=busy
                    open=state.reject.open
                    text=state.reject.text
                    on_confirm=Callback::new(move |reason| state.run(id, Act::Reject { reason }))
                />
            }.into_any())}
            {reconcile.then(|| view! {
                <ConfirmButton
                    label="Reconcile now"
                    question="Ask the provider now whether this happened?".to_owned()
                    disabled=busy
                    open=state.reconcile.open
                    text=state.reconcile.text
                    on_confirm=Callback::new(move |_| state.run(id, Act::Reconcile))
                />
            }.into_any())}
            {resolve.then(|| view! { <ResolvePanel id form=state.resolve state busy /> }.into_any())}
            {expire.then(|| view! {
                <ConfirmButton
                    label="Force-expire"
                    question="End this key's life now? The next claim with it starts a brand-new operation.".to_owned()
                    reason=Reason::Required
                    danger=true
                    disabled=busy
                    open=state.expire.open
                    text=state.expire.text
                    on_confirm=Callback::new(move |reason| state.run(id, Act::Expire { reason }))
                />
            }.into_any())}
        </section>
        {refusal}
    }
    .into_any()
}

/// "Resolve…": the outcome, its result or error, then a confirmation with the reason.
#[component]
fn ResolvePanel(
    id: Uuid,
    form: ResolveForm,
    state: ActionsState,
    busy: Memo<bool>,
) -> impl IntoView {
    let submit = Callback::new(move |reason: String| {
        let outcome = if form.succeeded.get_untracked() {
            Outcome::Succeeded
        } else {
            Outcome::Failed
        };
        state.run(
            id,
            Act::Resolve(Resolution {
                outcome,
                json: form.json.get_untracked(),
                retryable: form.retryable.get_untracked(),
                reason,
            }),
        );
        form.shown.set(false);
    });
    view! {
        <span class="resolve">
            <button type="button" class="secondary" on:click=move |_| form.shown.update(|s| *s = !*s)>
                "Resolve…"
            </button>
            <Show when=move || form.shown.get()>
                <fieldset class="resolve-form">
                    <legend>"Settle this operation by hand"</legend>
                    <label>
                        "Outcome"
                        <select
                            prop:value=move || if form.succeeded.get() { "succeeded" } else { "failed" }
                            on:change=move |ev| form.succeeded.set(event_target_value(&ev) == "succeeded")
                        >
                            <option value="succeeded">"succeeded"</option>
                            <option value="failed">"failed"</option>
                        </select>
                    </label>
                    <label>
                        {move || if form.succeeded.get() { "Result (JSON, optional)" } else { "Error (JSON, optional)" }}
                        <textarea
                            rows="3"
                            placeholder=move || if form.succeeded.get() { r#"{"refund_id": "re_123"}"# } else { r#"{"code": "declined"}"# }
                            prop:value=move || form.json.get()
                            on:input=move |ev| form.json.set(event_target_value(&ev))
                        ></textarea>
                    </label>
                    <Show when=move || !form.succeeded.get()>
                        <label class="checkbox">
                            <input
                                type="checkbox"
                                prop:checked=move || form.retryable.get()
                                on:change=move |ev| form.retryable.set(event_target_checked(&ev))
                            />
                            "Retryable: the agent's next claim may try again"
                        </label>
                    </Show>
                    <ConfirmButton
                        label="Resolve"
                        question="Record this outcome? It is final for the agent and audited with your name and reason.".to_owned()
                        reason=Reason::Required
                        disabled=busy
                        open=form.confirm.open
                        text=form.confirm.text
                        on_confirm=submit
                    />
                </fieldset>
            </Show>
        </span>
    }
}

/// Refusals handed from an island to the one that replaces it when the page is fetched
/// again (the browser shows one page; on the server nothing is kept).
mod refusals {
    use uuid::Uuid;

    use crate::UiError;

    #[cfg(feature = "hydrate")]
    thread_local! {
        static KEPT: std::cell::RefCell<Vec<(Uuid, UiError)>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    pub fn keep(id: Uuid, error: UiError) {
        #[cfg(feature = "hydrate")]
        KEPT.with(|kept| {
            let mut kept = kept.borrow_mut();
            kept.retain(|(other, _)| *other != id);
            kept.push((id, error));
        });
        #[cfg(not(feature = "hydrate"))]
        let _ = (id, error);
    }

    pub fn forget(id: Uuid) {
        let _ = take(id);
    }

    pub fn take(id: Uuid) -> Option<UiError> {
        #[cfg(feature = "hydrate")]
        {
            KEPT.with(|kept| {
                let mut kept = kept.borrow_mut();
                let at = kept.iter().position(|(other, _)| *other == id)?;
                Some(kept.remove(at).1)
            })
        }
        #[cfg(not(feature = "hydrate"))]
        {
            let _ = id;
            None
        }
    }
}
