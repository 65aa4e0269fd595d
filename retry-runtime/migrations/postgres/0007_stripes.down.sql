-- Stripes by connection again, as version 6 wrote them (`pg_backend_pid() % 8`): the rows
-- striped by transaction stay, and readers sum them alike.
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
