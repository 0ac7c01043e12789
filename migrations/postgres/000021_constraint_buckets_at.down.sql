DROP INDEX IF EXISTS constraint_buckets_at_idx;
