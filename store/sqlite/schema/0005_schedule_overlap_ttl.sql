-- A schedule's overlap policy (what a fire does while the previous fire's job has not ended) and
-- the job template's ttl and keep_result. Schedules that exist keep submitting every fire
-- (allow_all), as they did; the store writes every new schedule's policy explicitly.
ALTER TABLE schedules ADD COLUMN overlap TEXT NOT NULL DEFAULT 'allow_all'
    CHECK (overlap IN ('skip', 'buffer_one', 'allow_all'));
ALTER TABLE schedules ADD COLUMN ttl_ms INTEGER NOT NULL DEFAULT 0 CHECK (ttl_ms >= 0);
ALTER TABLE schedules ADD COLUMN keep_result INTEGER NOT NULL DEFAULT 0;
