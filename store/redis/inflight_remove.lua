-- inflight_remove: drop jobs from one worker's in-flight list and release the
-- locks of those it held.
--
-- KEYS[1]     the worker's in-flight list (LIST)
-- KEYS[1+i]   the lock key of job i, i = 1..n (same hash slot as KEYS[1])
-- ARGV[i]     the id of job i
--
-- Returns: integer, the number of distinct ids that were in the list (every
-- occurrence of each is removed; the others keep their order). The lock of an
-- id that was not in this worker's list is left alone: it belongs to whoever
-- pushed or claimed the job since, and a stale caller must not unlock it.
local list = KEYS[1]
local chunk = 1000 -- values per command: unpack is bounded by Lua's C stack

-- A few ids: LREM each, O(list length) per id.
if #ARGV <= 4 then
  local removed = 0
  for i = 1, #ARGV do
    if redis.call('LREM', list, 0, ARGV[i]) > 0 then
      redis.call('DEL', KEYS[i + 1])
      removed = removed + 1
    end
  end
  return removed
end

-- A batch: one pass over the list, which is rewritten when anything goes.
local lockOf = {}
for i = 1, #ARGV do
  lockOf[ARGV[i]] = KEYS[i + 1]
end
local entries = redis.call('LRANGE', list, 0, -1)
local kept, found, unlock = {}, {}, {}
for _, id in ipairs(entries) do
  local lock = lockOf[id]
  if lock == nil then
    kept[#kept + 1] = id
  elseif not found[id] then
    found[id] = true
    unlock[#unlock + 1] = lock
  end
end
if #unlock == 0 then
  return 0
end
redis.call('DEL', list)
for i = 1, #kept, chunk do
  redis.call('RPUSH', list, unpack(kept, i, math.min(i + chunk - 1, #kept)))
end
for i = 1, #unlock, chunk do
  redis.call('DEL', unpack(unlock, i, math.min(i + chunk - 1, #unlock)))
end
return #unlock
