-- rate_limit.lua: a shared rate limit (GCRA) — admits n events if the limit allows them now.
-- KEYS[1]  the limit's key: its value is the theoretical arrival time (TAT), µs of Redis's clock
-- ARGV[1]  emission interval: µs between two events at the limit (1e6 / rate)
-- ARGV[2]  burst tolerance: µs the TAT may run ahead of now (events admitted at once, × interval)
-- ARGV[3]  n, the events asked for (n × interval must not exceed the tolerance, or they never fit)
-- Reply    {admitted (0 or n), µs to wait before asking again (0 when admitted)}
--
-- Every process asks the same key, so the limit holds for all of them together. The clock is
-- Redis's own (TIME), so producers on different machines need no agreement on time.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then
  tat = now
end
local newTat = tat + n * interval
local allowAt = newTat - tolerance
if allowAt > now then
  return {0, allowAt - now}
end
redis.call('SET', KEYS[1], string.format('%d', newTat), 'PX', math.ceil((newTat - now) / 1000) + 1000)
return {n, 0}
