//! Pages of one thing named by the route's `{id}` (an operation, a request for approval).

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;
use serde::{de::DeserializeOwned, Serialize};
use std::future::Future;
use uuid::Uuid;

use crate::UiError;

/// What the route's `{id}` names, read with `read`; `Ok(None)` when the id is not a UUID (the
/// server is not asked, and the page says there is no such thing). Read again when the id
/// changes.
pub(crate) fn read_path_id<T, Fut>(
    read: impl Fn(Uuid) -> Fut + Copy + Send + Sync + 'static,
) -> Resource<Result<Option<T>, UiError>>
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
    Fut: Future<Output = Result<T, UiError>> + Send + 'static,
{
    let params = use_params_map();
    let id = Memo::new(move |_| {
        params
            .read()
            .get("id")
            .and_then(|id| id.parse::<Uuid>().ok())
    });
    Resource::new(
        move || id.get(),
        move |id| async move {
            match id {
                Some(id) => read(id).await.map(Some),
                None => Ok(None),
            }
        },
    )
}
