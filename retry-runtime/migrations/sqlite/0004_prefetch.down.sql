-- Drops the mark of prefetched tasks: builds of version 3 never read it; a build of version 4
-- applies this migration again when it connects.
ALTER TABLE retry_tasks DROP COLUMN given_back;
ALTER TABLE retry_tasks DROP COLUMN prefetched_token;
