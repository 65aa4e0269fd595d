-- Removes everything the baseline creates, tasks included (the triggers go with their table).
DROP TABLE IF EXISTS retry_worker_systems;
DROP TABLE IF EXISTS retry_scheduler_entries;
DROP TABLE IF EXISTS retry_workers;
DROP TABLE IF EXISTS retry_tasks;
DROP TABLE IF EXISTS retry_queues;
DROP TABLE IF EXISTS retry_history;
DROP TABLE IF EXISTS retry_counts;
