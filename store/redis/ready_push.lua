-- ready_push: lock jobs of one queue and add the locked ones to its ready set.
--
-- KEYS[1]        the queue's ready set (ZSET)
-- KEYS[1+i]      the lock key of job i, i = 1..n (same hash slot as KEYS[1])
-- ARGV[1]        lock TTL in milliseconds, > 0
-- ARGV[2i]       the ready-set score of job i
-- ARGV[2i+1]     the id of job i
--
-- Returns: integer, the number of jobs whose lock this call took. Each of them
-- is in the ready set afterwards (ZADD of a member already there, whose lock
-- had expired, updates its score and does not duplicate it). A job whose lock
-- is held is skipped.
local ttl = ARGV[1]
local taken = 0
local batch = {} -- score, id, score, id, … for one ZADD per chunk
local chunk = 1000 -- pairs per ZADD: unpack is bounded by Lua's C stack (~8000 values)
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'PX', ttl) then
    taken = taken + 1
    batch[#batch + 1] = ARGV[2 * i - 2]
    batch[#batch + 1] = ARGV[2 * i - 1]
    if #batch == 2 * chunk then
      redis.call('ZADD', KEYS[1], unpack(batch))
      batch = {}
    end
  end
end
if #batch > 0 then
  redis.call('ZADD', KEYS[1], unpack(batch))
end
return taken
