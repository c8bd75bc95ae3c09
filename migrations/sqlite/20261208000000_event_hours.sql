-- The counters' folded minutes per hour too, so that a week's or a month's window adds up
-- hours instead of reading every minute of every namespace and kind (10,080 or 43,200 each).
-- The roll-up adds each minute it folds to its hour in the same transaction, so an hour
-- holds exactly its folded minutes; the hour the watermark is in holds those folded so far.
create table event_hours (
    hour      integer not null,           -- unix minute / 60
    namespace text not null,
    kind      text not null,
    count     integer not null,
    primary key (hour, namespace, kind)
) without rowid;

insert into event_hours (hour, namespace, kind, count)
select bucket / 60, namespace, kind, sum(count)
from event_minutes
group by 1, 2, 3;
