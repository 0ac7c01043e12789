-- A schedule's overlap policy (what a fire does while the previous fire's job has not ended) and
-- the job template's ttl and keep_result. Schedules that exist keep submitting every fire
-- (allow_all), as they did; new ones get the policy the engine writes (skip by default).
ALTER TABLE schedules
    ADD COLUMN IF NOT EXISTS overlap     text    NOT NULL DEFAULT 'allow_all'
        CHECK (overlap IN ('skip', 'buffer_one', 'allow_all')),
    ADD COLUMN IF NOT EXISTS ttl_ms      bigint  NOT NULL DEFAULT 0 CHECK (ttl_ms >= 0),
    ADD COLUMN IF NOT EXISTS keep_result boolean NOT NULL DEFAULT false;
ALTER TABLE schedules ALTER COLUMN overlap SET DEFAULT 'skip';
