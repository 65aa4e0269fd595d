-- The last health probe of each system a worker reports (issue 44, item 2), written by its
-- heartbeat with the rest of the row (`retry_runtime::health::probe`, run in the worker's
-- process). `probe_passed`: 1 passed, 0 failed, NULL when the worker has no probe of the
-- system or its first run has not ended. `probe_error`: the failed run's error, at most 200
-- characters. `probe_ms`: when the run ended, in milliseconds on the queue's clock (the beat's
-- time less the probe's age), so a reader computes its age from its own time. Only adds
-- nullable columns: a build of version 5 keeps working beside it (its heartbeat leaves them
-- NULL: shown as no probe).
ALTER TABLE retry_worker_systems ADD COLUMN probe_passed BIGINT;
ALTER TABLE retry_worker_systems ADD COLUMN probe_error TEXT;
ALTER TABLE retry_worker_systems ADD COLUMN probe_ms BIGINT;
