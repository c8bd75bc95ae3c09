//! Keyset pagination of lists (`?limit=&cursor=`): a page of at most `limit` items, newest
//! first, and an opaque `next_cursor` naming the last item shown.

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
    let limit = match limit {
        None | Some("") => DEFAULT_LIMIT,
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_limit",
                    "limit must be a whole number from 1 to 200",
                )
            })?,
    };
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

/// The cursor of the next page: the last item's id, when more follow.
pub fn next_cursor(more: bool, last: Option<Uuid>) -> Option<String> {
    more.then_some(last)
        .flatten()
        .map(|id| format!("{CURSOR_PREFIX}{}", id.simple()))
}
