-- inflight_remove: drop jobs from one worker's in-flight set and release the locks of those it
-- held. O(log n) per job.
--
-- KEYS[1]     the worker's in-flight set (ZSET)
-- KEYS[1+i]   the lock key of job i, i = 1..n (same hash slot as KEYS[1])
-- ARGV[i]     the id of job i
--
-- Returns: integer, the number of distinct ids that were in the set. The lock of an id that was
-- not in this worker's set is left alone: it belongs to whoever was assigned the job since, and a
-- stale caller must not unlock it.
local removed = 0
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('DEL', KEYS[i + 1])
    removed = removed + 1
  end
end
return removed
