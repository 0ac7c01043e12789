-- A job dead-lettered because its handler said "do not retry" now records failure_reason
-- permanent_failure (the reason of its DEAD_LETTERED event) instead of the generic "error", so
-- `peek --dead`, GetJob and the facade's failure_reason say why it was dead-lettered. Rows written
-- before this release get the same value: no_retry marks exactly the permanent failures, and a
-- cancelled job (cancel_requested or failure_reason cancelled) keeps its reason.
UPDATE jobs SET failure_reason = 'permanent_failure'
WHERE state = 'DEAD_LETTERED' AND no_retry AND failure_reason = 'error' AND NOT cancel_requested;
