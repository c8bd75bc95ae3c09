//! Badges for statuses and effect classes, coloured by what needs attention.

use leptos::prelude::*;

use crate::domain::{Effect, OperationStatus};

/// The status of an operation; a stuck `unknown` is marked as such.
#[component]
pub fn StatusBadge(status: OperationStatus, #[prop(optional)] stuck: bool) -> impl IntoView {
    let label = if stuck {
        "unknown · stuck".to_owned()
    } else {
        status.as_str().replace('_', " ")
    };
    view! {
        <span class=format!("badge status-{}", status.as_str()) class:stuck=stuck data-status=status.as_str()>
            {label}
        </span>
    }
}

/// The effect class of a tool.
#[component]
pub fn EffectBadge(effect: Effect) -> impl IntoView {
    view! {
        <span class=format!("badge effect-{}", effect.as_str())>{effect.as_str().replace('_', " ")}</span>
    }
}
