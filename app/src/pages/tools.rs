//! The tool registry: every tool with the promise idem keeps for it; admins register and edit
//! tools here (the same path as `PUT /v1/tools/{name}`).

use leptos::prelude::*;

use crate::components::{
    show_changes_when, use_viewer, EffectBadge, EmptyState, ErrorNote, Frame, RelativeTime,
};
use crate::domain::Permission;
use crate::server_fns::{
    approval_name, guarantee_name, list_tools, RegisterTool, ToolForm, ToolView, EFFECTS,
};

#[component]
pub fn ToolsPage() -> impl IntoView {
    view! {
        <Frame>
            <Tools />
        </Frame>
    }
}

#[component]
fn Tools() -> impl IntoView {
    let admin = use_viewer().may(Permission::Administer);
    let tools = Resource::new(|| (), |_| list_tools());

    view! {
        {if admin {
            view! { <ToolRegistry /> }.into_any()
        } else {
            view! { <div class="heading-row"><h1>"Tools"</h1></div> }.into_any()
        }}
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match tools.await {
                    Ok(tools) if tools.is_empty() => view! {
                        <EmptyState title="No tools are registered.">
                            "Unregistered tools are treated as non-idempotent writes. An admin registers a tool here or with PUT /v1/tools/{name}."
                        </EmptyState>
                    }.into_any(),
                    Ok(tools) => view! { <ToolTable tools admin /> }.into_any(),
                    Err(error) => view! { <ErrorNote error /> }.into_any(),
                }
            })}
        </Transition>
    }
}

/// The form being edited, if any (blank for a new tool, filled for an edit), shared by the
/// page's islands: the heading's and each row's. The browser shows one page; on the server
/// every render starts with none.
fn editing() -> RwSignal<Option<ToolForm>> {
    #[cfg(feature = "hydrate")]
    {
        thread_local! {
            static EDITING: ArcRwSignal<Option<ToolForm>> = ArcRwSignal::new(None);
        }
        EDITING.with(|editing| RwSignal::from(editing.clone()))
    }
    #[cfg(not(feature = "hydrate"))]
    RwSignal::new(None)
}

/// For admins: the heading with "Register a tool", the editor and the last registration.
#[island]
fn ToolRegistry() -> impl IntoView {
    let register = ServerAction::<RegisterTool>::new();
    let editing = editing();
    show_changes_when(move || matches!(register.value().get(), Some(Ok(_))));
    view! {
        <div class="heading-row">
            <h1>"Tools"</h1>
            <Show when=move || editing.read().is_none()>
                <button type="button" on:click=move |_| editing.set(Some(ToolForm::blank()))>
                    "Register a tool"
                </button>
            </Show>
        </div>
        <RegisteredNote register />
        {move || editing.get().map(|form| view! { <ToolEditor form register editing /> })}
    }
}

/// A row's "Edit": opens the editor above, filled with the tool's policy.
#[island]
fn EditTool(form: ToolForm) -> impl IntoView {
    let editing = editing();
    let label = format!("Edit {}", form.name);
    view! {
        <button
            type="button"
            class="secondary"
            aria-label=label
            on:click=move |_| editing.set(Some(form.clone()))
        >
            "Edit"
        </button>
    }
}

#[component]
fn RegisteredNote(register: ServerAction<RegisterTool>) -> impl IntoView {
    move || {
        register.value().get().and_then(Result::ok).map(|tool| {
            view! { <p class="ok" role="status">{format!("Registered {}.", tool.name)}</p> }
        })
    }
}

#[component]
fn ToolTable(tools: Vec<ToolView>, admin: bool) -> impl IntoView {
    view! {
        <div class="table-wrap">
            <table class="tools cards forms">
                <thead>
                    <tr>
                        <th scope="col">"Name"</th>
                        <th scope="col">"Effect"</th>
                        <th scope="col">"Guarantee"</th>
                        <th scope="col">"Approval"</th>
                        <th scope="col">"TTL"</th>
                        <th scope="col">"Lease"</th>
                        <th scope="col">"Fields"</th>
                        <th scope="col">"Executor"</th>
                        <th scope="col">"Updated"</th>
                        <th scope="col"><span class="visually-hidden">"Actions"</span></th>
                    </tr>
                </thead>
                <tbody>
                    {tools.into_iter().map(|tool| view! { <ToolRow tool admin /> }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

#[component]
fn ToolRow(tool: ToolView, admin: bool) -> impl IntoView {
    let policy = tool.policy.clone();
    let form = ToolForm::of(&tool.name, &policy);
    view! {
        <tr data-tool=tool.name.clone() data-morph-key=tool.name.clone()>
            <th scope="row" data-label="Name">{tool.name.clone()}</th>
            <td data-label="Effect"><EffectBadge effect=policy.effect /></td>
            <td data-label="Guarantee"><span class="badge guarantee">{guarantee_name(tool.guarantee).replace('_', " ")}</span></td>
            <td data-label="Approval">{approval_name(policy.approval)}</td>
            <td data-label="TTL">{seconds(policy.ttl_seconds)}</td>
            <td data-label="Lease">{seconds(policy.lease_seconds)}</td>
            <td class="paths wide" data-label="Fields">
                <Paths label="key" paths=policy.key_fields.clone() />
                <Paths label="ignore" paths=policy.ignore_fields.clone() />
                <Paths label="redact" paths=policy.redact_fields.clone() />
            </td>
            <td class="executor wide" data-label="Executor">
                {match policy.executor.clone() {
                    Some(executor) => view! {
                        <code>{executor.url}</code>
                        {executor.reconcile_url.map(|url| view! { <br /><span class="muted">"reconcile "</span><code>{url}</code> })}
                        <br />
                        <span class="muted">
                            {format!("timeout {} ms", executor.timeout_ms)}
                            {executor.provider_dedupes.then_some(" · provider dedupes")}
                        </span>
                    }.into_any(),
                    None => view! { <span class="muted">"run by the agent"</span> }.into_any(),
                }}
            </td>
            <td data-label="Updated"><RelativeTime at=tool.updated_at /></td>
            <td class="actions">{admin.then(|| view! { <EditTool form /> })}</td>
        </tr>
    }
}

#[component]
fn Paths(label: &'static str, paths: Vec<String>) -> impl IntoView {
    (!paths.is_empty()).then(|| {
        view! {
            <span class="path-list">
                <span class="muted">{label}": "</span>
                <code>{paths.join(", ")}</code>
            </span>
        }
    })
}

fn seconds(value: u32) -> String {
    match value {
        v if v >= 86_400 && v % 86_400 == 0 => format!("{} d", v / 86_400),
        v if v >= 3_600 && v % 3_600 == 0 => format!("{} h", v / 3_600),
        v if v >= 60 && v % 60 == 0 => format!("{} min", v / 60),
        v => format!("{v} s"),
    }
}

/// The registration form; the server checks it and answers with its message.
#[component]
fn ToolEditor(
    form: ToolForm,
    register: ServerAction<RegisterTool>,
    editing: RwSignal<Option<ToolForm>>,
) -> impl IntoView {
    let is_new = form.name.is_empty();
    let draft = RwSignal::new(form);
    // Only answers to this form's submissions count, not an earlier form's.
    let opened_at = register.version().get_untracked();
    let answered = move || register.version().get() > opened_at;
    let error = move || {
        answered()
            .then(|| register.value().get())
            .flatten()
            .and_then(Result::err)
    };
    // A successful registration closes the form.
    Effect::new(move |_| {
        if answered() && matches!(register.value().get(), Some(Ok(_))) {
            editing.set(None);
        }
    });
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        register.dispatch(RegisterTool { form: draft.get() });
    };
    let title = if is_new {
        "Register a tool"
    } else {
        "Edit tool"
    };

    view! {
        <form class="card tool-form" aria-label=title on:submit=submit>
            <h2>{title}</h2>
            <div class="form-grid">
                <TextField label="Name" draft field=|f| &mut f.name readonly=!is_new />
                <label>
                    "Effect"
                    <select on:change=move |ev| draft.update(|f| f.effect = event_target_value(&ev))>
                        {EFFECTS
                            .iter()
                            .map(|effect| {
                                let name = effect.as_str();
                                view! {
                                    <option value=name selected=move || draft.read().effect == name>
                                        {name}
                                    </option>
                                }
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>
                    "Approval"
                    <select on:change=move |ev| draft.update(|f| f.approval = event_target_value(&ev))>
                        {["auto", "always"]
                            .into_iter()
                            .map(|name| view! {
                                <option value=name selected=move || draft.read().approval == name>
                                    {name}
                                </option>
                            })
                            .collect_view()}
                    </select>
                </label>
                <TextField label="TTL (seconds)" draft field=|f| &mut f.ttl_seconds />
                <TextField label="Lease (seconds)" draft field=|f| &mut f.lease_seconds />
                <TextField label="Approval TTL (seconds)" draft field=|f| &mut f.approval_ttl_seconds />
                <TextField label="Key fields" draft field=|f| &mut f.key_fields />
                <TextField label="Ignore fields" draft field=|f| &mut f.ignore_fields />
                <TextField label="Redact fields" draft field=|f| &mut f.redact_fields />
                <TextField label="Executor URL" draft field=|f| &mut f.executor_url />
                <TextField label="Reconcile URL" draft field=|f| &mut f.reconcile_url />
                <TextField label="Timeout (ms)" draft field=|f| &mut f.timeout_ms />
                <label class="check">
                    <input
                        type="checkbox"
                        prop:checked=move || draft.read().provider_dedupes
                        on:change=move |ev| draft.update(|f| f.provider_dedupes = event_target_checked(&ev))
                    />
                    "Provider dedupes by key"
                </label>
            </div>
            <p class="muted">"Fields are dotted paths, separated by commas. Leave the executor URL empty when the agent runs the tool itself."</p>
            {move || error().map(|error| view! { <ErrorNote error /> })}
            <div class="buttons">
                <button type="submit" disabled=move || register.pending().get()>"Save tool"</button>
                <button type="button" class="secondary" on:click=move |_| editing.set(None)>"Cancel"</button>
            </div>
        </form>
    }
}

/// A text input bound to one field of the draft.
#[component]
fn TextField(
    label: &'static str,
    draft: RwSignal<ToolForm>,
    field: fn(&mut ToolForm) -> &mut String,
    #[prop(optional)] readonly: bool,
) -> impl IntoView {
    view! {
        <label>
            {label}
            <input
                readonly=readonly
                prop:value=move || draft.with(|f| field(&mut f.clone()).clone())
                on:input=move |ev| draft.update(|f| *field(f) = event_target_value(&ev))
            />
        </label>
    }
}
