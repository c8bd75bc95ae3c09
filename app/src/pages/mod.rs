//! One module per route.

mod login;
mod not_found;
mod overview;

pub use login::LoginPage;
pub use not_found::NotFound;
pub use overview::OverviewPage;
