-- On PostgreSQL a trigger announces operation changes to every process. One process owns a
-- SQLite file and publishes its changes in process after each commit, so there is nothing
-- to create here; the file keeps both folders' migrations in step.
select 1;
