-- A constrained claim reads only the rate buckets written within one token's time (the ones that can
-- be out of tokens) and the buckets of its candidates' keys by primary key, not every bucket short of
-- full: this index makes the first a range scan. The table is small (the maintenance pass deletes
-- buckets once full again), so building it takes a moment.
CREATE INDEX IF NOT EXISTS constraint_buckets_at_idx ON constraint_buckets (constraint_name, at);
