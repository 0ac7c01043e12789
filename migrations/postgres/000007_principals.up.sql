-- Principals : who registered each worker and who submitted each job, so that a worker
-- principal acts only on its own worker ids and a producer sees only its own jobs. '' = registered
-- or submitted while authentication was off (no owner). A constant default is catalog-only in
-- PostgreSQL 11+: neither table is rewritten.
ALTER TABLE workers ADD COLUMN IF NOT EXISTS principal text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS principal text NOT NULL DEFAULT '';
