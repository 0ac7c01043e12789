-- Retry-After : a failure report may ask that the next attempt start no earlier than a
-- delay after the report (an HTTP endpoint's Retry-After, queue.RetryAfter). The report writes it;
-- the retry sweep schedules the retry at the later of the queue's backoff and now() + this delay,
-- then resets it to 0. 0 means the backoff alone.
--
-- A constant default adds the column without rewriting the table (PostgreSQL 11+): the default is
-- kept in the catalog and read for every existing row.
ALTER TABLE jobs ADD COLUMN retry_after_ms bigint NOT NULL DEFAULT 0;
