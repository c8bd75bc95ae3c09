//! Signing in and out from the browser.

use leptos::prelude::*;

use crate::domain::UserInfo;
use crate::UiError;

#[cfg(feature = "ssr")]
use super::context::{
    answer_with_status, audit, client_address, identity, session_cookie, session_token, signed_in,
};

/// Checks the credentials, opens a session and sets its cookie.
#[server(prefix = "/api", endpoint = "login")]
pub async fn login(username: String, password: String) -> Result<UserInfo, UiError> {
    let address = client_address();
    let outcome = identity()?.login(&username, &password, address).await;
    let tried = outcome.as_ref().map(|(user, _)| user);
    audit()?.login(&username, address, tried).await;
    let (user, token) = outcome.map_err(answer_with_status)?;
    let lifetime = identity()?.session_lifetime();
    let cookie = session_cookie()?.set(token.expose(), lifetime);
    expect_context::<leptos_axum::ResponseOptions>()
        .insert_header(http::header::SET_COOKIE, cookie);
    Ok(user)
}

/// Ends the current session and clears its cookie.
#[server(prefix = "/api", endpoint = "logout")]
pub async fn logout() -> Result<(), UiError> {
    if let Some(token) = session_token() {
        identity()?
            .logout(&token)
            .await
            .map_err(answer_with_status)?;
    }
    let cookie = session_cookie()?.clear();
    expect_context::<leptos_axum::ResponseOptions>()
        .insert_header(http::header::SET_COOKIE, cookie);
    Ok(())
}

/// The person signed in, if any.
#[server(prefix = "/api", endpoint = "me")]
pub async fn current_user() -> Result<Option<UserInfo>, UiError> {
    match session_token() {
        Some(token) => identity()?
            .person_for_session(&token)
            .await
            .map_err(answer_with_status),
        None => Ok(None),
    }
}

/// Changes the signed-in person's own password (the current one is required) and ends their
/// other sessions; this one stays. Open to a person who must change a generated password.
#[server(prefix = "/api", endpoint = "change_password")]
pub async fn change_password(
    current_password: String,
    new_password: String,
) -> Result<(), UiError> {
    let address = client_address();
    let audit = audit()?;
    let identity = identity()?;
    let (person, token) = signed_in().await?;
    identity
        .change_own_password(&person, &token, &current_password, &new_password)
        .await
        .map_err(answer_with_status)?;
    audit
        .record(crate::audit::PersonAction {
            actor: crate::audit::person_actor(&person.username),
            address,
            action: crate::audit::actions::PASSWORD_CHANGED,
            subject: format!("user:{}", person.username),
            detail: serde_json::json!({ "own": true }),
        })
        .await;
    Ok(())
}
