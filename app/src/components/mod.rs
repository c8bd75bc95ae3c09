//! Pieces the pages share: the signed-in frame, the live change stream, badges, times,
//! copy buttons and notices.

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
pub use frame::{use_viewer, Frame};
pub use json::{FieldList, JsonView};
pub use live::{use_live, Live, LiveGate};
pub use notice::{EmptyState, ErrorNote};
pub use time::{use_now, Now, RelativeTime};
