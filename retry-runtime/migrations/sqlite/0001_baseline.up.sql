-- The layout of every table, index and trigger up to the first recorded version. Every
-- statement is idempotent: on a database made by an unversioned release (before
-- retry_migrations existed) it creates what that release lacked and leaves the rest, after the
-- migrator added the columns such a release lacks (store/adopt.rs).

-- The tasks. `seq` grows with each insert: tasks due at the same millisecond run in enqueue order.
CREATE TABLE IF NOT EXISTS retry_tasks (
    seq              INTEGER PRIMARY KEY,
    queue            TEXT NOT NULL,
    id               TEXT NOT NULL,
    kind             TEXT NOT NULL,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN
                         ('pending', 'scheduled', 'active', 'retry', 'archived', 'completed')),
    retried          INTEGER NOT NULL,
    max_retry        INTEGER NOT NULL,
    timeout_ms       INTEGER NOT NULL,
    deadline_ms      INTEGER,
    key_expires_ms   INTEGER,
    next_process_ms  INTEGER,
    lease_token      INTEGER,
    lease_expires_ms INTEGER,
    last_err         TEXT,
    last_failed_ms   INTEGER,
    created_ms       INTEGER NOT NULL,
    finished_ms      INTEGER,
    retention_ms     INTEGER,
    unique_key       TEXT,
    unique_until_ms  INTEGER,
    errors           TEXT,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    system           TEXT,
    deferred_ms      INTEGER,
    trace_parent     TEXT,
    UNIQUE (queue, id)
);
CREATE INDEX IF NOT EXISTS retry_tasks_due ON retry_tasks (queue, next_process_ms, seq)
    WHERE state IN ('pending', 'scheduled', 'retry');
CREATE INDEX IF NOT EXISTS retry_tasks_leases ON retry_tasks (queue, lease_expires_ms)
    WHERE state = 'active';
CREATE INDEX IF NOT EXISTS retry_tasks_finished ON retry_tasks (queue, state, finished_ms)
    WHERE state IN ('archived', 'completed');
CREATE INDEX IF NOT EXISTS retry_tasks_retained ON retry_tasks (queue, (finished_ms + retention_ms))
    WHERE state = 'completed' AND retention_ms IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS retry_tasks_unique ON retry_tasks (queue, unique_key)
    WHERE unique_key IS NOT NULL;
-- find: one kind index over the states that wait or run, one over the finished states; a row is
-- in exactly one, so a state change moves one index entry.
CREATE INDEX IF NOT EXISTS retry_tasks_kind_live
    ON retry_tasks (queue, state, kind, next_process_ms, seq)
    WHERE state IN ('pending', 'scheduled', 'active', 'retry');
CREATE INDEX IF NOT EXISTS retry_tasks_kind_finished
    ON retry_tasks (queue, state, kind, finished_ms, seq)
    WHERE state IN ('archived', 'completed');
-- systems: the live tasks naming a system, and the waiting retries (the retry share's claims).
CREATE INDEX IF NOT EXISTS retry_tasks_system
    ON retry_tasks (queue, system, state, next_process_ms, seq)
    WHERE system IS NOT NULL AND state IN ('pending', 'scheduled', 'active', 'retry');
CREATE INDEX IF NOT EXISTS retry_tasks_retries ON retry_tasks (queue, next_process_ms, seq)
    WHERE retried > 0 AND state IN ('pending', 'scheduled', 'retry');
-- The error groups of the dashboard.
CREATE INDEX IF NOT EXISTS retry_tasks_errors ON retry_tasks (queue, state, last_err, last_failed_ms)
    WHERE state IN ('retry', 'archived') AND last_err IS NOT NULL;

CREATE TABLE IF NOT EXISTS retry_queues (
    queue  TEXT    NOT NULL PRIMARY KEY,
    paused BOOLEAN NOT NULL DEFAULT FALSE
);

-- Per-state counts and the hourly history of attempts, kept by triggers.
CREATE TABLE IF NOT EXISTS retry_counts (
    queue  TEXT    NOT NULL,
    state  TEXT    NOT NULL,
    stripe INTEGER NOT NULL,
    tasks  INTEGER NOT NULL,
    PRIMARY KEY (queue, state, stripe)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS retry_history (
    queue     TEXT    NOT NULL,
    hour_ms   INTEGER NOT NULL,
    stripe    INTEGER NOT NULL,
    processed INTEGER NOT NULL,
    failed    INTEGER NOT NULL,
    PRIMARY KEY (queue, hour_ms, stripe)
) WITHOUT ROWID;
-- A table that had no count triggers is counted once, from the tasks themselves (the migration
-- holds the write lock: no task changes between this count and the triggers).
DELETE FROM retry_counts WHERE (SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'
    AND name IN ('retry_tasks_counted_insert', 'retry_tasks_counted_delete',
                 'retry_tasks_counted_update')) < 3;
INSERT INTO retry_counts (queue, state, stripe, tasks)
    SELECT queue, state, 0, COUNT(*) FROM retry_tasks
    WHERE (SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'
           AND name IN ('retry_tasks_counted_insert', 'retry_tasks_counted_delete',
                        'retry_tasks_counted_update')) < 3
    GROUP BY queue, state;
CREATE TRIGGER IF NOT EXISTS retry_tasks_counted_insert AFTER INSERT ON retry_tasks BEGIN
    INSERT INTO retry_counts (queue, state, stripe, tasks) VALUES (NEW.queue, NEW.state, 0, 1)
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = tasks + 1;
END;
CREATE TRIGGER IF NOT EXISTS retry_tasks_counted_delete AFTER DELETE ON retry_tasks BEGIN
    UPDATE retry_counts SET tasks = tasks - 1
        WHERE queue = OLD.queue AND state = OLD.state AND stripe = 0;
END;
CREATE TRIGGER IF NOT EXISTS retry_tasks_counted_update AFTER UPDATE OF state ON retry_tasks
    WHEN OLD.state <> NEW.state BEGIN
    UPDATE retry_counts SET tasks = tasks - 1
        WHERE queue = OLD.queue AND state = OLD.state AND stripe = 0;
    INSERT INTO retry_counts (queue, state, stripe, tasks) VALUES (NEW.queue, NEW.state, 0, 1)
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = tasks + 1;
    INSERT INTO retry_history (queue, hour_ms, stripe, processed, failed)
        SELECT NEW.queue, COALESCE(CASE NEW.state WHEN 'retry' THEN NEW.last_failed_ms
                                   ELSE NEW.finished_ms END, 0) / 3600000 * 3600000,
               0, 1, NEW.state <> 'completed'
        WHERE OLD.state = 'active' AND NEW.state IN ('completed', 'retry', 'archived')
        ON CONFLICT (queue, hour_ms, stripe) DO UPDATE
            SET processed = processed + 1, failed = failed + excluded.failed;
END;

-- Who runs on the database: a row per live worker process and per scheduler entry, each with
-- the time after which it is no longer believed (stale_ms); queues and active are JSON arrays.
CREATE TABLE IF NOT EXISTS retry_workers (
    id           TEXT   NOT NULL PRIMARY KEY,
    host         TEXT   NOT NULL,
    pid          BIGINT NOT NULL,
    queues       TEXT   NOT NULL,
    concurrency  BIGINT NOT NULL,
    started_ms   BIGINT NOT NULL,
    heartbeat_ms BIGINT NOT NULL,
    stale_ms     BIGINT NOT NULL,
    active       TEXT   NOT NULL
);
CREATE TABLE IF NOT EXISTS retry_scheduler_entries (
    scheduler        TEXT   NOT NULL,
    entry            BIGINT NOT NULL,
    queue            TEXT   NOT NULL,
    kind             TEXT,
    spec             TEXT   NOT NULL,
    next_run_ms      BIGINT,
    last_enqueued_ms BIGINT,
    last_task_id     TEXT,
    heartbeat_ms     BIGINT NOT NULL,
    stale_ms         BIGINT NOT NULL,
    PRIMARY KEY (scheduler, entry)
);
-- What each live worker reports of the external systems it knows.
CREATE TABLE IF NOT EXISTS retry_worker_systems (
    worker       TEXT   NOT NULL,
    system       TEXT   NOT NULL,
    queues       TEXT   NOT NULL,
    held         BIGINT NOT NULL,
    rate_milli   BIGINT,
    ramping      BIGINT NOT NULL,
    breaker      TEXT   NOT NULL,
    heartbeat_ms BIGINT NOT NULL,
    stale_ms     BIGINT NOT NULL,
    PRIMARY KEY (worker, system)
);
