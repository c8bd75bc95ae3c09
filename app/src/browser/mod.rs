//! What runs only in the browser, beside the islands: keeping a server-rendered page current
//! without reloading it.
//!
//! The pages are rendered on the server alone (islands mode), so a page that should show a
//! change fetches itself again and [`morph`]s the new HTML into the document: nodes that did
//! not change stay (with what a person typed, what has focus, and the islands' own state),
//! and islands that are new, or whose props changed, are hydrated afresh.

pub mod checkboxes;
pub mod clock;
pub mod copy;
pub mod local_time;
mod morph;
pub mod refresh;
pub mod stream;
