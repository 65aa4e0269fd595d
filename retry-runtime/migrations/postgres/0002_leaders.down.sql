-- Drops the leases: builds of version 1 run their own maintenance; a build of version 2
-- applies this migration again when it connects.
DROP TABLE IF EXISTS retry_leaders;
