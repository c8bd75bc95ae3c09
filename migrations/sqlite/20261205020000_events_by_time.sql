-- An operation's trail is read by time (then writing order), a page at a time: the operation
-- page shows the newest events first, and an operation may have a million replays.
create index operation_events_by_time on operation_events (operation_id, at, seq);
