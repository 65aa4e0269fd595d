-- The stripe of a count or history row follows the transaction, not the connection (issue 45).
-- The count triggers add each statement's moves to a row of `retry_counts` (and the attempts of
-- each hour to one of `retry_history`) picked by stripe, so that concurrent writers rarely
-- update one row; picked by `pg_backend_pid() % 8`, two pooled connections whose ids share a
-- remainder met on the same rows in every statement, for as long as both lived: the claims of
-- a worker of 1 000 slots waited on its completions' row locks half of their time
-- (`Lock:transactionid` in `pg_stat_activity`), and the queue ran at 0.8 of its pace. By
-- `txid_current() % 32`, two transactions meet once in 32, and not again the next time.
-- A transaction keeps one stripe in every statement, as a connection did: its statements lock
-- their rows in the same order as before. Readers sum the stripes, so rows striped either way
-- count alike: a build of version 6 keeps working beside it.
CREATE OR REPLACE FUNCTION retry_tasks_counted() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO retry_counts AS c (queue, state, stripe, tasks)
        SELECT queue, state, txid_current() % 32,
               CASE TG_OP WHEN 'DELETE' THEN -COUNT(*) ELSE COUNT(*) END
        FROM retry_counted GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks;
    RETURN NULL;
END $f$;
CREATE OR REPLACE FUNCTION retry_tasks_moved() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO retry_counts AS c (queue, state, stripe, tasks)
        SELECT queue, state, txid_current() % 32, SUM(moved)
        FROM (SELECT queue, state, 1 AS moved FROM retry_after
              UNION ALL SELECT queue, state, -1 FROM retry_before) AS moves
        GROUP BY queue, state HAVING SUM(moved) <> 0 ORDER BY queue, state
        ON CONFLICT (queue, state, stripe) DO UPDATE SET tasks = c.tasks + EXCLUDED.tasks;
    INSERT INTO retry_history AS h (queue, hour_ms, stripe, processed, failed)
        SELECT a.queue,
               COALESCE(CASE a.state WHEN 'retry' THEN a.last_failed_ms ELSE a.finished_ms END, 0)
                   / 3600000 * 3600000 AS hour_ms,
               txid_current() % 32, COUNT(*), COUNT(*) FILTER (WHERE a.state <> 'completed')
        FROM retry_before AS b JOIN retry_after AS a ON a.seq = b.seq
        WHERE b.state = 'active' AND a.state IN ('completed', 'retry', 'archived')
        GROUP BY a.queue, hour_ms ORDER BY a.queue, hour_ms
        ON CONFLICT (queue, hour_ms, stripe) DO UPDATE
            SET processed = h.processed + EXCLUDED.processed, failed = h.failed + EXCLUDED.failed;
    RETURN NULL;
END $f$;
