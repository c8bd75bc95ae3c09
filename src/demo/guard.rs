//! Where the demo refuses to run. It makes people with printed passwords, an API key and
//! tools named like real ones, so it serves only its own database (see `storage::survey`)
//! and only on this machine (loopback, no https public URL). Each refusal comes before
//! anything is written and says how to start a demo instead.

use std::net::{IpAddr, SocketAddr};

use crate::config::ServeConfig;
use crate::storage::survey::{self, Survey};
use crate::storage::{Database, OpenError};

/// How to start a demo that cannot touch real data, for every refusal.
const HOW_TO: &str = "start a demo on its own database and on this machine: \
    idem serve --demo --database-url sqlite://idem-demo.db (or `make run`)";

/// Why `--demo` will not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoRefused {
    /// The database holds things the demo did not make.
    #[error(
        "--demo refuses this database: it holds {} that the demo did not create, and the demo \
         would add its people, API key and tools among them; {HOW_TO}",
        .0.join(", ")
    )]
    RealData(Vec<&'static str>),
    /// The server would be reachable from other machines.
    #[error(
        "--demo refuses --bind {0}: the demo prints its people's passwords and must listen on \
         loopback only (127.0.0.1, ::1 or localhost); {HOW_TO}"
    )]
    NotLoopback(String),
    /// The server says it is reached over https, as a real deployment is.
    #[error(
        "--demo refuses an https IDEM_PUBLIC_URL ({0}): that is a real deployment's address; \
         {HOW_TO}"
    )]
    PublicHttps(String),
    /// The database could not be read.
    #[error("--demo could not look at the database first: {0}")]
    Unreadable(#[from] OpenError),
    /// The mark could not be written.
    #[error("--demo could not mark the database as the demo's: {0}")]
    Claim(#[from] app::store_error::StoreError),
}

/// Checks, before anything is opened for writing, that the demo may run with this
/// configuration: on loopback, without an https public URL, on its own or an empty database.
pub async fn admit(config: &ServeConfig) -> Result<(), DemoRefused> {
    if !is_loopback(&config.bind) {
        return Err(DemoRefused::NotLoopback(config.bind.clone()));
    }
    if config.serves_https() {
        let url = config.public_url.clone().unwrap_or_default();
        return Err(DemoRefused::PublicHttps(url));
    }
    refuse_real_data(survey::survey(&config.database.database_url).await?)
}

/// Makes the migrated database the demo's own, unless real data reached it since [`admit`]
/// looked (then it is refused as `admit` would have).
pub async fn claim(database: &Database, url: &str) -> Result<(), DemoRefused> {
    if database.claim_for_demo().await? {
        return Ok(());
    }
    refuse_real_data(survey::survey(url).await?)
}

/// Refuses a database the demo may not serve.
pub fn refuse_real_data(survey: Survey) -> Result<(), DemoRefused> {
    if survey.demo_may_serve() {
        Ok(())
    } else {
        Err(DemoRefused::RealData(survey.holds))
    }
}

/// Whether the listen address is this machine's own: a loopback IP or `localhost`.
fn is_loopback(bind: &str) -> bool {
    if let Ok(address) = bind.parse::<SocketAddr>() {
        return address.ip().is_loopback();
    }
    let host = bind.rsplit_once(':').map_or(bind, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_loopback() {
        let cases = [
            ("127.0.0.1:3000", true),
            ("127.0.0.1:0", true),
            ("[::1]:3000", true),
            ("localhost:3000", true),
            ("LOCALHOST:3000", true),
            ("0.0.0.0:3000", false),
            ("[::]:3000", false),
            ("10.0.0.5:3000", false),
            ("example.com:3000", false),
        ];
        for (bind, loopback) in cases {
            assert_eq!(is_loopback(bind), loopback, "{bind}");
        }
    }

    #[test]
    fn the_demo_serves_its_own_database_or_an_empty_one() {
        let refused = |survey| refuse_real_data(survey).is_err();
        assert!(!refused(Survey::default()));
        let marked_with_data = Survey {
            marked_for_demo: true,
            holds: vec!["people", "tools"],
        };
        assert!(!refused(marked_with_data));
        let real = Survey {
            marked_for_demo: false,
            holds: vec!["people"],
        };
        assert!(refused(real));
    }
}
