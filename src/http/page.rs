//! Keyset pagination of lists (`?limit=&cursor=`): a page of at most `limit` items, newest
//! first, and an opaque `next_cursor` naming the last item shown.

use app::ledger::{EventPage, EventPosition};
use uuid::Uuid;

use super::error::{ApiError, ApiResult};

/// Cursors are opaque to clients; the prefix lets the format change without breaking links.
const CURSOR_PREFIX: &str = "c1_";

/// Items per page when the caller does not say.
const DEFAULT_LIMIT: u32 = 50;
/// The most items one page may hold.
const MAX_LIMIT: u32 = 200;

/// Parses `limit` (1–200, default 50) and `cursor` (the id of the last item of the previous
/// page, or none for the first page); either left empty is as if left out.
pub fn parse(limit: Option<&str>, cursor: Option<&str>) -> ApiResult<(u32, Option<Uuid>)> {
    let limit = parse_limit(limit, DEFAULT_LIMIT, MAX_LIMIT)?;
    let before = match cursor {
        None | Some("") => None,
        Some(cursor) => Some(
            cursor
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|id| Uuid::try_parse(id).ok())
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_cursor",
                        "cursor is not one this server gave out",
                    )
                })?,
        ),
    };
    Ok((limit, before))
}

/// `limit`: 1 to `max`, `default` when left out or empty.
fn parse_limit(limit: Option<&str>, default: u32, max: u32) -> ApiResult<u32> {
    match limit {
        None | Some("") => Ok(default),
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_limit",
                    format!("limit must be a whole number from 1 to {max}"),
                )
            }),
    }
}

/// The cursor of the next page: the last item's id, when more follow.
pub fn next_cursor(more: bool, last: Option<Uuid>) -> Option<String> {
    more.then_some(last)
        .flatten()
        .map(|id| format!("{CURSOR_PREFIX}{}", id.simple()))
}

/// Events per page when the caller does not say, and at most: the whole trail of nearly every
/// operation, and a bounded answer for one with a million replays.
const MAX_EVENTS: u32 = 1000;

/// Parses the events page of `limit` (1–1000, default 1000), `cursor` (a `next_cursor`) and
/// `order` (`oldest`, the default, or `newest` first); left empty, each is as if left out.
pub fn parse_events(
    limit: Option<&str>,
    cursor: Option<&str>,
    order: Option<&str>,
) -> ApiResult<EventPage> {
    let limit = parse_limit(limit, MAX_EVENTS, MAX_EVENTS)?;
    let newest_first = match order {
        None | Some("") | Some("oldest") => false,
        Some("newest") => true,
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_order",
                "order must be oldest or newest",
            ))
        }
    };
    let after = match cursor {
        None | Some("") => None,
        Some(cursor) => Some(EventPosition::from_cursor(cursor).ok_or_else(|| {
            ApiError::bad_request("invalid_cursor", "cursor is not one this server gave out")
        })?),
    };
    Ok(EventPage {
        after,
        limit,
        newest_first,
    })
}
