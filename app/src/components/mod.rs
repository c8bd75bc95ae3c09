//! Pieces the pages share: the signed-in frame, the live change stream, badges, times,
//! copy buttons and notices.

use leptos::prelude::*;

mod actions;
mod badges;
mod chart_time;
mod confirm;
mod copy;
mod frame;
mod json;
mod live;
mod notice;
mod time;

pub use actions::{OperationActions, Permitted};
pub use badges::{EffectBadge, StatusBadge};
pub use chart_time::{chart_time, zone_note};
pub use confirm::{ConfirmButton, Reason};
pub use copy::CopyText;
pub use frame::{use_viewer, Frame, Hydrated, Viewer};
pub use json::{FieldList, JsonView};
pub use notice::{EmptyState, ErrorNote};
#[cfg(feature = "hydrate")]
pub use time::relative;
pub use time::RelativeTime;

/// Shows the effect of a person's action at once: the page is fetched again and morphed in
/// (on the server, where islands also render, there is nothing to do).
pub fn show_changes() {
    #[cfg(feature = "hydrate")]
    crate::browser::refresh::now();
}

/// Shows the effect of an island's action each time `succeeded` (tracked) turns true.
pub fn show_changes_when(succeeded: impl Fn() -> bool + Send + Sync + 'static) {
    Effect::new(move |_| {
        if succeeded() {
            show_changes();
        }
    });
}
