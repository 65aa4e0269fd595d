-- Removes everything the baseline creates, tasks included.
DROP TABLE IF EXISTS retry_worker_systems;
DROP TABLE IF EXISTS retry_scheduler_entries;
DROP TABLE IF EXISTS retry_workers;
DROP TABLE IF EXISTS retry_tasks;
DROP TABLE IF EXISTS retry_queues;
DROP TABLE IF EXISTS retry_history;
DROP TABLE IF EXISTS retry_counts;
DROP FUNCTION IF EXISTS retry_tasks_counted();
DROP FUNCTION IF EXISTS retry_tasks_moved();
DROP FUNCTION IF EXISTS retry_tasks_inserted();
DROP FUNCTION IF EXISTS retry_tasks_waiting();
DROP FUNCTION IF EXISTS retry_queues_unpaused();
