-- Circuit breakers : each worker's breakers that are not closed, as its last heartbeat
-- reported them, for `jq worker list` and for the assignment stream opened on any replica.
-- A JSON array of {"queue", "state", "failure_rate", "samples", "since"}; '[]' = all closed
-- (and every worker that reports none). A constant default is catalog-only: no table rewrite.
ALTER TABLE workers ADD COLUMN IF NOT EXISTS breakers jsonb NOT NULL DEFAULT '[]';
