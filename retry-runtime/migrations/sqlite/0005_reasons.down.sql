-- Drops the stored reason of archived tasks: builds of version 4 never read it (their
-- `last_err` still ends with the reason in words); a build of version 5 applies this
-- migration again when it connects.
ALTER TABLE retry_tasks DROP COLUMN archive_reason;
