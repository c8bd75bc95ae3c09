-- Operation changes are announced by the server after they commit, many per notification
-- (src/storage/postgres/announcer.rs): a transaction that notifies queues on one lock through
-- its commit, so a trigger that notified in every writing transaction kept their commits
-- from sharing a flush. The trigger stays only where notifying inside the transaction is
-- what makes it safe: a change to an operation that was final (a new attempt, an expiry)
-- and the retiring of a key's operation. Processes that keep final outcomes in memory must
-- hear of those in commit order, before the fence that follows them (kept_members.rs);
-- they are rare.
drop trigger operations_announce on operations;

create trigger operations_announce
    after update on operations
    for each row
    when (old.status in ('succeeded', 'failed', 'rejected')
        or (old.retired_at is null and new.retired_at is not null))
    execute function idem_announce_operation();
