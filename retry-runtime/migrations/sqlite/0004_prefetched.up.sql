-- Which claimed tasks a worker holds beyond its free slots and has not started (issue 41,
-- item 3): the claim sets `prefetched_token` to its lease token for the tasks it prefetches
-- (NULL for those it starts at once), and the worker clears it, fenced, before their handler
-- runs. A task whose lease expires with `prefetched_token = lease_token` never started: the
-- recoverer gives it back pending without charging a retry. Only adds a nullable column: a
-- build of version 3 keeps working beside it (its claims leave the column as it was, a value
-- that never equals a later lease token, so its tasks are charged on a crash as before).
ALTER TABLE retry_tasks ADD COLUMN prefetched_token BIGINT;
