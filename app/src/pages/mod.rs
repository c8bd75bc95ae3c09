//! One module per route.

mod admin;
mod approval;
mod approval_request;
mod approvals;
mod login;
mod not_found;
mod operation;
mod operations;
mod overview;
mod overview_tools;
mod password;
mod path_id;
mod tools;
mod unknowns;

pub use admin::AdminPage;
pub use approval::ApprovalPage;
pub use approvals::ApprovalsPage;
pub use login::LoginPage;
pub use not_found::NotFound;
pub use operation::OperationPage;
pub use operations::OperationsPage;
pub use overview::OverviewPage;
pub use password::PasswordPage;
pub use tools::ToolsPage;
pub use unknowns::UnknownsPage;
