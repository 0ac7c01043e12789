-- Aging of weighted dispatch : a due job that has waited max_wait is dispatched before any
-- other of its queue, whatever its priority; 0: no aging (every existing queue). A constant default
-- is catalog-only: no table rewrite.
ALTER TABLE queues ADD COLUMN IF NOT EXISTS max_wait_ms bigint NOT NULL DEFAULT 0 CHECK (max_wait_ms >= 0);
