-- The layout of every table, index, function and trigger up to the first recorded version.
-- Every statement is idempotent: on a database made by an unversioned release (before
-- retry_migrations existed) it creates what that release lacked and leaves the rest, after the
-- migrator added the columns such a release lacks (store/adopt.rs).

-- The tasks. `seq` grows with each insert: tasks due at the same millisecond run in enqueue order.
CREATE TABLE IF NOT EXISTS retry_tasks (
    seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue            TEXT NOT NULL,
    id               TEXT NOT NULL,
    kind             TEXT NOT NULL,
    payload          TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN
                         ('pending', 'scheduled', 'active', 'retry', 'archived', 'completed')),
    retried          BIGINT NOT NULL,
    max_retry        BIGINT NOT NULL,
    timeout_ms       BIGINT NOT NULL,
    deadline_ms      BIGINT,
    key_expires_ms   BIGINT,
    next_process_ms  BIGINT,
    lease_token      BIGINT,
    lease_expires_ms BIGINT,
    last_err         TEXT,
    last_failed_ms   BIGINT,
    created_ms       BIGINT NOT NULL,
    finished_ms      BIGINT,
    retention_ms     BIGINT,
    unique_key       TEXT,
    unique_until_ms  BIGINT,
    errors           TEXT,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    system           TEXT,
    deferred_ms      BIGINT,
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

-- Per-state counts and the hourly history of attempts, kept by statement triggers and striped
-- by backend (pg_backend_pid() % 8) so that concurrent writers rarely update one row.
CREATE TABLE IF NOT EXISTS retry_counts (
    queue  TEXT   NOT NULL,
    state  TEXT   NOT NULL,
    stripe BIGINT NOT NULL,
    tasks  BIGINT NOT NULL,
    PRIMARY KEY (queue, state, stripe)
);
CREATE TABLE IF NOT EXISTS retry_history (
    queue     TEXT   NOT NULL,
    hour_ms   BIGINT NOT NULL,
    stripe    BIGINT NOT NULL,
    processed BIGINT NOT NULL,
    failed    BIGINT NOT NULL,
    PRIMARY KEY (queue, hour_ms, stripe)
);
CREATE OR REPLACE FUNCTION retry_tasks_counted() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO retry_counts AS c (queue, state, stripe, tasks)
        SELECT queue, state, pg_backend_pid() % 8,
               CASE TG_OP WHEN 'DELETE' THEN -COUNT(*) ELSE COUNT(*) END
        FROM retry_counted GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks;
    RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION retry_tasks_moved() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO retry_counts AS c (queue, state, stripe, tasks)
        SELECT queue, state, pg_backend_pid() % 8, SUM(moved)
        FROM (SELECT queue, state, 1 AS moved FROM retry_after
              UNION ALL SELECT queue, state, -1 FROM retry_before) AS moves
        GROUP BY queue, state HAVING SUM(moved) <> 0 ORDER BY queue, state
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks;
    INSERT INTO retry_history AS h (queue, hour_ms, stripe, processed, failed)
        SELECT a.queue,
               COALESCE(CASE a.state WHEN 'retry' THEN a.last_failed_ms ELSE a.finished_ms END, 0)
                   / 3600000 * 3600000 AS hour_ms,
               pg_backend_pid() % 8, COUNT(*), COUNT(*) FILTER (WHERE a.state <> 'completed')
        FROM retry_before AS b JOIN retry_after AS a ON a.seq = b.seq
        WHERE b.state = 'active' AND a.state IN ('completed', 'retry', 'archived')
        GROUP BY a.queue, hour_ms ORDER BY a.queue, hour_ms
        ON CONFLICT (queue, hour_ms, stripe) DO UPDATE
            SET processed = h.processed + EXCLUDED.processed, failed = h.failed + EXCLUDED.failed;
    RETURN NULL;
END $f$;
-- A table that had no count triggers is counted once, from the tasks themselves, with writers
-- held off (SHARE ROW EXCLUSIVE) until this transaction commits: the triggers start from it.
DO $d$ BEGIN
    IF (SELECT COUNT(*) FROM pg_trigger WHERE tgrelid = 'retry_tasks'::regclass
        AND tgname IN ('retry_tasks_counted_insert', 'retry_tasks_counted_delete',
                       'retry_tasks_counted_update')) < 3 THEN
        LOCK TABLE retry_tasks IN SHARE ROW EXCLUSIVE MODE;
        DROP TRIGGER IF EXISTS retry_tasks_counted_insert ON retry_tasks;
        DROP TRIGGER IF EXISTS retry_tasks_counted_delete ON retry_tasks;
        DROP TRIGGER IF EXISTS retry_tasks_counted_update ON retry_tasks;
        CREATE TRIGGER retry_tasks_counted_insert AFTER INSERT ON retry_tasks
            REFERENCING NEW TABLE AS retry_counted FOR EACH STATEMENT
            EXECUTE FUNCTION retry_tasks_counted();
        CREATE TRIGGER retry_tasks_counted_delete AFTER DELETE ON retry_tasks
            REFERENCING OLD TABLE AS retry_counted FOR EACH STATEMENT
            EXECUTE FUNCTION retry_tasks_counted();
        CREATE TRIGGER retry_tasks_counted_update AFTER UPDATE ON retry_tasks
            REFERENCING OLD TABLE AS retry_before NEW TABLE AS retry_after FOR EACH STATEMENT
            EXECUTE FUNCTION retry_tasks_moved();
        DELETE FROM retry_counts;
        INSERT INTO retry_counts (queue, state, stripe, tasks)
            SELECT queue, state, 0, COUNT(*) FROM retry_tasks GROUP BY queue, state;
    END IF;
END $d$;

-- Wake-ups: NOTIFY retry_tasks, '<queue>' once per inserting statement and queue, when a task
-- becomes waiting again (a claim or a completion does not match the WHEN and costs no call), and
-- when a queue is unpaused.
CREATE OR REPLACE FUNCTION retry_tasks_inserted() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pg_notify('retry_tasks', q.queue) FROM (SELECT DISTINCT queue FROM retry_woken) AS q;
    RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION retry_tasks_waiting() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pg_notify('retry_tasks', NEW.queue);
    RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION retry_queues_unpaused() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM pg_notify('retry_tasks', OLD.queue);
    RETURN NULL;
END $f$;
DO $d$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'retry_tasks'::regclass
                   AND tgname = 'retry_tasks_inserted') THEN
        CREATE TRIGGER retry_tasks_inserted AFTER INSERT ON retry_tasks
            REFERENCING NEW TABLE AS retry_woken FOR EACH STATEMENT
            EXECUTE FUNCTION retry_tasks_inserted();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'retry_tasks'::regclass
                   AND tgname = 'retry_tasks_waiting') THEN
        CREATE TRIGGER retry_tasks_waiting AFTER UPDATE ON retry_tasks FOR EACH ROW
            WHEN (NEW.state IN ('pending', 'scheduled', 'retry') AND OLD.state <> NEW.state)
            EXECUTE FUNCTION retry_tasks_waiting();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'retry_queues'::regclass
                   AND tgname = 'retry_queues_unpaused') THEN
        CREATE TRIGGER retry_queues_unpaused AFTER DELETE ON retry_queues FOR EACH ROW
            WHEN (OLD.paused) EXECUTE FUNCTION retry_queues_unpaused();
    END IF;
END $d$;

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
