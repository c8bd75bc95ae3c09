//! People on the pages: an admin disables and deletes from the Admin page's server functions,
//! anyone changes their own password, and the first admin is sent to the password page.

use app::domain::{Role, Username};

use crate::helpers::{Client, Db, TestApp};
use crate::on_both_databases;
use crate::processes::ServerProcess;
use crate::ui_admin::call;
use idem::storage::testing::TestDatabase;

on_both_databases!(
    an_admin_disables_and_deletes_people_from_the_admin_page,
    anyone_changes_their_own_password_from_the_password_page,
    the_first_admin_is_sent_to_the_password_page_until_they_change_it,
);

const PASSWORD: &str = "olga's long password";

async fn olga(app: &TestApp) -> (Client, String) {
    app.create_person("olga", Role::Viewer, PASSWORD).await;
    let client = app.anonymous();
    assert_eq!(client.login("olga", PASSWORD).await.status(), 200);
    let name = Username::try_from("olga").unwrap();
    let user = app.state.identity.user_by_username(&name).await.unwrap();
    (client, user.unwrap().id.to_string())
}

async fn an_admin_disables_and_deletes_people_from_the_admin_page(db: Db) {
    let app = TestApp::spawn(db).await;
    let admin = app.person(Role::Admin).await;
    let (olga, id) = olga(&app).await;

    let disabled = call(&admin, "update_user", &format!("id={id}&disabled=true")).await;
    assert_eq!(disabled.status(), 200);
    assert_eq!(olga.me().await.status(), 401, "her session ended");
    let enabled = call(
        &admin,
        "update_user",
        &format!("id={id}&disabled=false&role=operator"),
    )
    .await;
    assert_eq!(enabled.status(), 200);
    assert_eq!(olga.login("olga", PASSWORD).await.status(), 200);

    let deleted = call(&admin, "delete_user", &format!("id={id}")).await;
    assert_eq!(deleted.status(), 200);
    assert_eq!(olga.me().await.status(), 401);
    let again = call(&admin, "delete_user", &format!("id={id}")).await;
    assert_eq!(again.status(), 404);
}

async fn anyone_changes_their_own_password_from_the_password_page(db: Db) {
    let app = TestApp::spawn(db).await;
    let (here, _) = olga(&app).await;
    let elsewhere = app.anonymous();
    assert_eq!(elsewhere.login("olga", PASSWORD).await.status(), 200);
    assert_eq!(here.get_page("/password").await.status(), 200);

    let wrong = call(
        &here,
        "change_password",
        "current_password=nope&new_password=a+new+long+one",
    )
    .await;
    assert_eq!(wrong.status(), 400);
    let form = "current_password=olga%27s+long+password&new_password=a+new+long+one";
    assert_eq!(call(&here, "change_password", form).await.status(), 200);
    assert_eq!(here.me().await.status(), 200, "this session stays");
    assert_eq!(elsewhere.me().await.status(), 401, "the other one ended");
    assert_eq!(
        app.anonymous()
            .login("olga", "a new long one")
            .await
            .status(),
        200
    );
}

async fn the_first_admin_is_sent_to_the_password_page_until_they_change_it(db: Db) {
    let database = TestDatabase::create(db).await;
    let server = ServerProcess::start(database.url());
    let line = server
        .stdout_line(std::time::Duration::from_secs(10))
        .unwrap();
    let password = line
        .split("with password ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let admin = Client::anonymous(&server.address);
    assert_eq!(admin.login("admin", &password).await.status(), 200);

    for page in ["/", "/admin", "/operations"] {
        let response = admin.get_page(page).await;
        assert!(
            response.status().is_redirection(),
            "{page}: {}",
            response.status()
        );
        assert_eq!(response.headers()["location"], "/password", "{page}");
    }
    assert_eq!(admin.get_page("/password").await.status(), 200);
    assert_eq!(call(&admin, "users", "").await.status(), 403);

    let form = format!(
        "current_password={}&new_password=the+admin%27s+own+password",
        urlencode(&password)
    );
    assert_eq!(call(&admin, "change_password", &form).await.status(), 200);
    assert_eq!(admin.get_page("/admin").await.status(), 200);
    assert_eq!(call(&admin, "users", "").await.status(), 200);
}

/// Percent-encodes everything but letters and digits.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() {
                (byte as char).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}
