-- Drops the reported probes: builds of version 5 never read them; a build of version 6
-- applies this migration again when it connects.
ALTER TABLE retry_worker_systems DROP COLUMN probe_ms;
ALTER TABLE retry_worker_systems DROP COLUMN probe_error;
ALTER TABLE retry_worker_systems DROP COLUMN probe_passed;
