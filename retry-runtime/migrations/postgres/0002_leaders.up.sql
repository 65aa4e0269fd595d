-- One leader per queue for its maintenance (the recoverer, the janitor, the sweep of stale
-- presence rows): a lease row per queue, taken when absent or lapsed, renewed by its holder on
-- its heartbeat, deleted when it stops gracefully. Times are milliseconds from the writer's
-- queue clock. Only adds a table: a build of version 1 keeps working beside it (it runs its
-- own maintenance, as before, and never reads this table).
CREATE TABLE IF NOT EXISTS retry_leaders (
    queue      TEXT   NOT NULL PRIMARY KEY,
    worker     TEXT   NOT NULL,
    expires_ms BIGINT NOT NULL
);
