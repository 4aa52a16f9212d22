-- Change the bound of an existing queue and bring :not_full in line with it.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :not_full
-- ARGV[1] - the new bound (0 = unbounded)
-- return 1, or -4 if the queue does not exist
if redis.call('EXISTS', KEYS[2]) == 0 then return -4 end
local bound = tonumber(ARGV[1])
local len = items_len(KEYS[1])  -- read first: a wrong type fails before any write
redis.call('LLEN', KEYS[3])
redis.call('SET', KEYS[2], ARGV[1])
if bound == 0 or len < bound then
  redis.call('LPUSH', KEYS[3], 1)
  redis.call('LTRIM', KEYS[3], 0, 0)
else
  redis.call('DEL', KEYS[3])
end
return 1
