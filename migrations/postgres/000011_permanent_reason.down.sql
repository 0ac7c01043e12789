-- Back to the generic reason the previous release recorded for a permanent failure.
UPDATE jobs SET failure_reason = 'error'
WHERE state = 'DEAD_LETTERED' AND failure_reason = 'permanent_failure';
