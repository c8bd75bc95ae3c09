//! JSON values laid out for reading: top-level fields as a list, nested values indented.

use leptos::prelude::*;
use serde_json::Value;

/// Pretty-printed JSON in a `<pre>`.
#[component]
pub fn JsonView(value: Value) -> impl IntoView {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    view! { <pre class="json">{text}</pre> }
}

/// An object's fields as a definition list (scalars inline, the rest pretty-printed); any
/// other value as [`JsonView`].
#[component]
pub fn FieldList(value: Value) -> impl IntoView {
    match value {
        Value::Object(fields) if !fields.is_empty() => view! {
            <dl class="fields">
                {fields
                    .into_iter()
                    .map(|(name, value)| {
                        view! {
                            <dt>{name}</dt>
                            <dd>{scalar_or_block(value)}</dd>
                        }
                    })
                    .collect_view()}
            </dl>
        }
        .into_any(),
        other => view! { <JsonView value=other /> }.into_any(),
    }
}

fn scalar_or_block(value: Value) -> AnyView {
    match value {
        Value::String(text) => view! { <span class="scalar">{text}</span> }.into_any(),
        Value::Number(_) | Value::Bool(_) | Value::Null => {
            view! { <code class="scalar">{value.to_string()}</code> }.into_any()
        }
        nested => view! { <JsonView value=nested /> }.into_any(),
    }
}
