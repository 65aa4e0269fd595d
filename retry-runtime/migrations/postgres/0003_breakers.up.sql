-- The breaker state of each external system, shared by the workers of a queue (issue 40,
-- item 4): the transient failures in a row of the workers' attempts of the system, the time
-- (the writer's queue clock, ms) until which it is open, and the lease of the one probe
-- let through across the queue once that time has passed. Written on the failure path (and
-- by the answer that resets a count a worker knows to be non-zero, or closes it after a
-- probe), read once per claim round by the workers that know the system. Only adds a table:
-- a build of version 2 keeps working beside it (it never reads it, and its attempts feed
-- only their own process's breaker).
CREATE TABLE IF NOT EXISTS retry_breakers (
    queue          TEXT   NOT NULL,
    system         TEXT   NOT NULL,
    failures       BIGINT NOT NULL,
    open_until_ms  BIGINT,
    probe_until_ms BIGINT,
    PRIMARY KEY (queue, system)
);
