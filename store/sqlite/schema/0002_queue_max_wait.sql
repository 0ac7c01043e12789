-- Aging of weighted dispatch : a due job that has waited max_wait is dispatched before any
-- other of its queue, whatever its priority; 0: no aging.
ALTER TABLE queues ADD COLUMN max_wait_ms INTEGER NOT NULL DEFAULT 0 CHECK (max_wait_ms >= 0);
