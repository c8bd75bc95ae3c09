-- The demo's mark: one row, written by `idem serve --demo` when it first finds the database
-- empty. `--demo` serves only a database that carries it (or holds nothing yet), so the demo
-- never mixes its people, tools and key with real ones.
create table demo_database (
    id        integer primary key check (id = 1),
    marked_at timestamptz not null
);
