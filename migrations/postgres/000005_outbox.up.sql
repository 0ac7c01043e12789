-- Outbox relay : a claim lease on unpublished events.
--
-- A relay claims a batch by setting claimed_until (FOR UPDATE SKIP LOCKED, one short statement),
-- publishes it to Kafka with no transaction open, then sets published_at. Other replicas skip
-- events whose lease has not expired, so they do not publish the same batch in normal operation;
-- a relay that dies mid-batch leaves the lease to expire and another claim takes the events again
-- (at least once). Adding a nullable column without a default rewrites nothing, and no index
-- covers it, so a claim is a HOT update where the page has room.
ALTER TABLE job_events ADD COLUMN claimed_until timestamptz;
