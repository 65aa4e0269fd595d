-- Drops the shared breaker state: builds of version 2 keep their breakers per process; a
-- build of version 3 applies this migration again when it connects.
DROP TABLE IF EXISTS retry_breakers;
