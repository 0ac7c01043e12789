-- claim: atomically move up to max jobs from a queue's ready set to one
-- worker's in-flight list (the BRPOPLPUSH pattern, for a sorted set).
--
-- KEYS[1]   the queue's ready set (ZSET)
-- KEYS[2]   the worker's in-flight list (LIST), same hash slot as KEYS[1]
-- ARGV[1]   max, the most jobs to move, > 0
--
-- Returns: array of the moved job ids in pop order (lowest score — highest
-- priority, then oldest — first), also the order they are appended to the
-- list. Empty when the ready set is empty. Locks are left as they are.
local popped = redis.call('ZPOPMIN', KEYS[1], ARGV[1])
local ids = {}
for i = 1, #popped, 2 do
  ids[#ids + 1] = popped[i]
end
-- unpack is bounded by Lua's C stack (~8000 values), hence the chunks.
local chunk = 1000
for i = 1, #ids, chunk do
  redis.call('RPUSH', KEYS[2], unpack(ids, i, math.min(i + chunk - 1, #ids)))
end
return ids
