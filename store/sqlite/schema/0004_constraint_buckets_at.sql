-- A constrained claim reads only the rate buckets written within one token's time (the ones that can
-- be out of tokens), and its candidates' buckets by primary key: this index makes the first a range.
CREATE INDEX constraint_buckets_at_idx ON constraint_buckets (constraint_name, at);
