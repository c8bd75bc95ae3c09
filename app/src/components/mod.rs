//! Pieces the pages share: the signed-in frame, the live change stream, badges, times,
//! copy buttons and notices.
// The pages that use every piece land in this same session (issue #6); until then, unused.
#![allow(dead_code, unused_imports)]

mod actions;
mod badges;
mod confirm;
mod copy;
mod frame;
mod json;
mod live;
mod notice;
mod time;

pub use actions::{ActionsState, OperationActions};
pub use badges::{EffectBadge, StatusBadge};
pub use confirm::{ConfirmButton, Reason};
pub use copy::CopyText;
pub use frame::{use_viewer, Frame, Viewer};
pub use json::{FieldList, JsonView};
pub use live::{use_live, Live, LiveGate, LiveIndicator};
pub use notice::{EmptyState, ErrorNote};
pub use time::{relative, use_now, Now, RelativeTime};
