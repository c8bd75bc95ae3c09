//! Administration (admins only): people and API keys. A new key is shown exactly once.

use leptos::prelude::*;

use crate::components::{
    show_changes_when, use_viewer, ConfirmButton, CopyText, EmptyState, ErrorNote, Frame,
    RelativeTime,
};
use crate::domain::{ApiKeyInfo, Permission, Role, UserInfo};
use crate::server_fns::{list_api_keys, list_users, CreateApiKey, CreateUser, RevokeApiKey};

mod people;
use people::PersonActions;

#[component]
pub fn AdminPage() -> impl IntoView {
    view! {
        <Frame>
            <h1>"Admin"</h1>
            <AdminOnly />
        </Frame>
    }
}

#[component]
fn AdminOnly() -> impl IntoView {
    if use_viewer().may(Permission::Administer) {
        view! {
            <Users />
            <ApiKeys />
        }
        .into_any()
    } else {
        view! {
            <p class="error" role="alert">
                "Your role does not allow this: only admins manage people and API keys."
            </p>
        }
        .into_any()
    }
}

#[component]
fn Users() -> impl IntoView {
    let users = Resource::new(|| (), |_| list_users());

    view! {
        <section class="admin-section" aria-labelledby="users-title">
            <h2 id="users-title">"People"</h2>
            <CreatePerson />
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match users.await {
                        Ok(users) => view! { <UserTable users /> }.into_any(),
                        Err(error) => view! { <ErrorNote error /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

/// The form that creates a person, and the server's answer.
#[island]
fn CreatePerson() -> impl IntoView {
    let create = ServerAction::<CreateUser>::new();
    show_changes_when(move || matches!(create.value().get(), Some(Ok(_))));
    let created = move || create.value().get();
    view! {
        <ActionForm action=create attr:class="card inline-form" attr:aria-label="Create a person">
            <label>"Username" <input name="username" autocomplete="off" required /></label>
            <label>
                "Role"
                <select name="role">
                    {Role::ALL
                        .into_iter()
                        .map(|role| view! { <option value=role.as_str() selected=role == Role::Viewer>{role.as_str()}</option> })
                        .collect_view()}
                </select>
            </label>
            <label>"Password" <input type="password" name="password" autocomplete="new-password" required /></label>
            <button type="submit" disabled=move || create.pending().get()>"Create person"</button>
        </ActionForm>
        {move || match created() {
            Some(Ok(user)) => view! {
                <p class="ok" role="status">{format!("Created {} ({}).", user.username, user.role)}</p>
            }.into_any(),
            Some(Err(error)) => view! { <ErrorNote error /> }.into_any(),
            None => ().into_any(),
        }}
    }
}

#[component]
fn UserTable(users: Vec<UserInfo>) -> impl IntoView {
    view! {
        <div class="table-wrap">
            <table class="users cards forms">
                <thead>
                    <tr>
                        <th scope="col">"Username"</th>
                        <th scope="col">"Role"</th>
                        <th scope="col">"Created"</th>
                        <th scope="col">"Status"</th>
                        <th scope="col">"Actions"</th>
                    </tr>
                </thead>
                <tbody>
                    {users
                        .into_iter()
                        .map(|user| view! {
                            <tr data-user=user.username.to_string() data-morph-key=user.username.to_string() class:revoked=user.disabled>
                                <th scope="row" data-label="Username">{user.username.to_string()}</th>
                                <td data-label="Role"><span class="badge">{user.role.as_str()}</span></td>
                                <td data-label="Created"><RelativeTime at=user.created_at /></td>
                                <td data-label="Status">
                                    {if user.disabled {
                                        view! { <span class="badge status-rejected">"disabled"</span> }.into_any()
                                    } else {
                                        view! { <span class="muted">"active"</span> }.into_any()
                                    }}
                                </td>
                                <td class="actions">
                                    <PersonActions
                                        id=user.id
                                        username=user.username.to_string()
                                        role=user.role
                                        disabled=user.disabled
                                    />
                                </td>
                            </tr>
                        })
                        .collect_view()}
                </tbody>
            </table>
        </div>
    }
}

#[component]
fn ApiKeys() -> impl IntoView {
    let keys = Resource::new(|| (), |_| list_api_keys());

    view! {
        <section class="admin-section" aria-labelledby="keys-title">
            <h2 id="keys-title">"API keys"</h2>
            <CreateKey />
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match keys.await {
                        Ok(keys) if keys.is_empty() => view! {
                            <EmptyState title="No API keys yet.">
                                "Create one per agent namespace; the agent sends it as Authorization: Bearer …"
                            </EmptyState>
                        }.into_any(),
                        Ok(keys) => view! { <KeyTable keys /> }.into_any(),
                        Err(error) => view! { <ErrorNote error /> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

/// The form that creates an API key, and the new key, shown once.
#[island]
fn CreateKey() -> impl IntoView {
    let create = ServerAction::<CreateApiKey>::new();
    show_changes_when(move || matches!(create.value().get(), Some(Ok(_))));
    let create_error = move || create.value().get().and_then(Result::err);
    view! {
        <ActionForm action=create attr:class="card inline-form" attr:aria-label="Create an API key">
            <label>"Namespace" <input name="namespace" autocomplete="off" required /></label>
            <label>"Key name" <input name="name" autocomplete="off" /></label>
            <button type="submit" disabled=move || create.pending().get()>"Create key"</button>
        </ActionForm>
        {move || create_error().map(|error| view! { <ErrorNote error /> })}
        // The key lives only in this island's memory: a reload forgets it.
        {move || create.value().get().and_then(Result::ok).map(|created| view! {
            <div class="new-key" role="status" aria-label="New API key">
                <p>
                    <strong>{format!("The key for {}:", created.api_key.namespace)}</strong>
                </p>
                <CopyText text=created.key label="API key" />
                <p class="warn-note">"Copy it now: it cannot be shown again."</p>
            </div>
        })}
    }
}

#[component]
fn KeyTable(keys: Vec<ApiKeyInfo>) -> impl IntoView {
    view! {
        <div class="table-wrap">
            <table class="api-keys cards forms">
                <thead>
                    <tr>
                        <th scope="col">"Name"</th>
                        <th scope="col">"Namespace"</th>
                        <th scope="col">"Prefix"</th>
                        <th scope="col">"Created"</th>
                        <th scope="col">"Last used"</th>
                        <th scope="col">"Revoked"</th>
                    </tr>
                </thead>
                <tbody>
                    {keys.into_iter().map(|key| view! { <KeyRow key /> }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

#[component]
fn KeyRow(key: ApiKeyInfo) -> impl IntoView {
    let name = if key.name.is_empty() {
        "—".to_owned()
    } else {
        key.name.clone()
    };
    view! {
        <tr data-prefix=key.prefix.clone() data-morph-key=key.prefix.clone() class:revoked=key.revoked_at.is_some()>
            <th scope="row" data-label="Name">{name}</th>
            <td data-label="Namespace">{key.namespace.to_string()}</td>
            <td data-label="Prefix"><code>{key.prefix.clone()}</code></td>
            <td data-label="Created"><RelativeTime at=key.created_at /></td>
            <td data-label="Last used">
                {match key.last_used_at {
                    Some(at) => view! { <RelativeTime at /> }.into_any(),
                    None => view! { <span class="muted">"never"</span> }.into_any(),
                }}
            </td>
            <td class="actions">
                {match key.revoked_at {
                    Some(at) => view! { <span class="badge status-rejected">"revoked"</span>" "<RelativeTime at /> }.into_any(),
                    None => view! { <Revoke id=key.id prefix=key.prefix.clone() /> }.into_any(),
                }}
            </td>
        </tr>
    }
}

/// Revokes one key, behind a confirmation; a refusal shows beside the button.
#[island]
fn Revoke(id: uuid::Uuid, prefix: String) -> impl IntoView {
    let revoke = ServerAction::<RevokeApiKey>::new();
    show_changes_when(move || matches!(revoke.value().get(), Some(Ok(_))));
    let on_revoke = Callback::new(move |_reason: String| {
        revoke.dispatch(RevokeApiKey { id });
    });
    view! {
        <ConfirmButton
            label="Revoke"
            question=format!("Revoke the key {prefix}? Agents using it are refused at once.")
            on_confirm=on_revoke
            danger=true
        />
        {move || revoke.value().get().and_then(Result::err).map(|error| view! { <ErrorNote error /> })}
    }
}
