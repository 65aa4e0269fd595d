-- Which claimed tasks a worker holds beyond its free slots (issue 41, item 3), so that a crash
-- charges no retry to those that never started. `prefetched_token`: the claim sets it to its
-- lease token for the tasks it prefetches (NULL for those it starts at once); the worker clears
-- it when it renews a started task's lease (before the handler, for a task already given back
-- once). `given_back`: how many times the recoverer gave the task back without a charge, its
-- mark still set. A task whose lease expires with `prefetched_token = lease_token` is given
-- back pending, uncharged; the second time, only if its mark was cleared before its handler
-- could run, so a task that crashes its process is charged from its second crash on. Only adds
-- columns: a build of version 3 keeps working beside it (its claims leave the mark as it was,
-- a value that never equals a later lease token, so its tasks are charged on a crash as
-- before).
ALTER TABLE retry_tasks ADD COLUMN prefetched_token BIGINT;
ALTER TABLE retry_tasks ADD COLUMN given_back BIGINT NOT NULL DEFAULT 0;
