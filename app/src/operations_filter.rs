//! What the operations table is filtered by, as its URL's query string holds it, so a
//! filtered view is a link a person can share; and the same filter as a CSV export link.

use serde::{Deserialize, Serialize};

use crate::views::{form_time_value, parse_form_time};

/// The table's filter, each field as the query string holds it (empty: any).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationsFilter {
    pub status: String,
    pub tool: String,
    pub namespace: String,
    pub run_id: String,
    /// A part of the idempotency key.
    pub key: String,
    /// Created at or after this moment: RFC 3339, or a `datetime-local` value read as UTC.
    pub since: String,
    /// Created before this moment, written as `since` is.
    pub until: String,
    /// `true`: only stuck operations.
    pub stuck: String,
}

impl OperationsFilter {
    /// The query parameters, in the order they appear in a link.
    const NAMES: [&'static str; 8] = [
        "status",
        "tool",
        "namespace",
        "run_id",
        "key",
        "since",
        "until",
        "stuck",
    ];

    /// Reads the filter from query parameters (`get` returns a parameter's value).
    pub fn from_query(get: impl Fn(&str) -> Option<String>) -> Self {
        let read = |name: &str| get(name).map(|v| v.trim().to_owned()).unwrap_or_default();
        Self {
            status: read("status"),
            tool: read("tool"),
            namespace: read("namespace"),
            run_id: read("run_id"),
            key: read("key"),
            since: read("since"),
            until: read("until"),
            stuck: read("stuck"),
        }
    }

    fn values(&self) -> [&str; 8] {
        [
            &self.status,
            &self.tool,
            &self.namespace,
            &self.run_id,
            &self.key,
            &self.since,
            &self.until,
            &self.stuck,
        ]
    }

    /// Whether nothing is filtered.
    pub fn is_empty(&self) -> bool {
        self.values().iter().all(|value| value.is_empty())
    }

    /// Whether only stuck operations are kept.
    pub fn stuck_only(&self) -> bool {
        self.stuck == "true"
    }

    /// The `/operations` link for this filter, on the page after `cursor` if given. Empty
    /// fields are left out, so links stay short.
    pub fn href(&self, cursor: Option<&str>) -> String {
        let pairs = Self::NAMES
            .into_iter()
            .zip(self.values())
            .chain(cursor.map(|c| ("cursor", c)));
        link("/operations", pairs)
    }

    /// The link that downloads every operation this filter keeps as CSV
    /// (`GET /v1/operations/export`, which spells times in RFC 3339 and the key search
    /// `key_contains`).
    pub fn export_href(&self) -> String {
        let rfc3339 = |text: &str| {
            parse_form_time(text)
                .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_else(|| text.to_owned())
        };
        let (since, until) = (rfc3339(&self.since), rfc3339(&self.until));
        let pairs = [
            ("status", self.status.as_str()),
            ("tool", &self.tool),
            ("namespace", &self.namespace),
            ("run_id", &self.run_id),
            ("key_contains", &self.key),
            ("since", &since),
            ("until", &until),
            ("stuck", &self.stuck),
        ];
        link("/v1/operations/export", pairs)
    }

    /// How a time field shows its value: a moment the form can read back, in UTC.
    pub fn time_field_value(text: &str) -> String {
        parse_form_time(text)
            .map(form_time_value)
            .unwrap_or_else(|| text.to_owned())
    }
}

/// `path` with the non-empty pairs as its query string.
fn link<'a>(path: &str, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let query: Vec<String> = pairs
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| format!("{name}={}", encode_query_value(value)))
        .collect();
    if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

/// Percent-encodes a query value (unreserved characters stay, a space becomes `+`).
fn encode_query_value(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            b' ' => "+".to_owned(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::OperationsFilter;

    fn filter(pairs: &[(&str, &str)]) -> OperationsFilter {
        OperationsFilter::from_query(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn an_empty_filter_links_to_the_bare_page() {
        let empty = filter(&[("status", ""), ("tool", "  ")]);
        assert!(empty.is_empty());
        assert_eq!(empty.href(None), "/operations");
        assert_eq!(empty.export_href(), "/v1/operations/export");
    }

    #[test]
    fn a_filter_keeps_only_given_fields_and_adds_the_cursor() {
        let f = filter(&[
            ("status", "unknown"),
            ("namespace", "support-bot"),
            ("key", "order 12&x"),
        ]);
        assert!(!f.is_empty());
        assert_eq!(
            f.href(None),
            "/operations?status=unknown&namespace=support-bot&key=order+12%26x"
        );
        assert_eq!(
            f.href(Some("0190-ab")),
            "/operations?status=unknown&namespace=support-bot&key=order+12%26x&cursor=0190-ab"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        let f = filter(&[("run_id", "run/42?é")]);
        assert_eq!(f.href(None), "/operations?run_id=run%2F42%3F%C3%A9");
    }

    #[test]
    fn the_time_range_and_stuck_are_part_of_the_filter() {
        let f = filter(&[
            ("since", "2026-12-05T14:30"),
            ("until", "2026-12-05T16:00:00+01:00"),
            ("stuck", "true"),
        ]);
        assert!(f.stuck_only());
        assert_eq!(
            f.href(None),
            "/operations?since=2026-12-05T14%3A30&until=2026-12-05T16%3A00%3A00%2B01%3A00&stuck=true"
        );
        assert_eq!(
            OperationsFilter::time_field_value(&f.until),
            "2026-12-05T15:00:00"
        );
    }

    #[test]
    fn the_export_link_speaks_the_rest_api() {
        let f = filter(&[
            ("tool", "refund"),
            ("key", "order-1"),
            ("since", "2026-12-05T14:30"),
            ("stuck", "true"),
        ]);
        assert_eq!(
            f.export_href(),
            "/v1/operations/export?tool=refund&key_contains=order-1\
             &since=2026-12-05T14%3A30%3A00Z&stuck=true"
        );
    }
}
