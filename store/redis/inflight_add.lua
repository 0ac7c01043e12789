-- inflight_add: record jobs a worker was just assigned (by Postgres): each job enters the worker's
-- in-flight set and takes its lock, in one round trip. O(log n) per job.
--
-- KEYS[1]     the worker's in-flight set (ZSET), member = job id, score = assignment time (ms)
-- KEYS[1+i]   the lock key of job i, i = 1..n (same hash slot as KEYS[1])
-- ARGV[1]     lock TTL in milliseconds, > 0
-- ARGV[2]     the assignment time in milliseconds (the score)
-- ARGV[2+i]   the id of job i
--
-- Returns: integer, the number of ids that were not in the set before.
local set = KEYS[1]
local ttl = ARGV[1]
local now = ARGV[2]
local added = 0
for i = 3, #ARGV do
  added = added + redis.call('ZADD', set, now, ARGV[i])
  redis.call('SET', KEYS[i - 1], ARGV[i], 'PX', ttl)
end
return added
