-- Change the bound of an existing queue and bring :not_full in line with it.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :not_full
-- KEYS[4] - :pressure:bound_unset (goes: the bound is named now; see create.lua)
-- ARGV[1] - the new bound (0 = unbounded)
-- return 1, or -4 if the queue does not exist
local items_key, bound_key, not_full, bound_unset = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local new_bound = ARGV[1]
if redis.call('EXISTS', bound_key) == 0 then return -4 end
local bound = tonumber(new_bound)
local len = items_len(items_key)  -- read first: a wrong type fails before any write
redis.call('LLEN', not_full)
redis.call('SET', bound_key, new_bound)
redis.call('DEL', bound_unset)
if bound == 0 or len < bound then
  redis.call('LPUSH', not_full, '1')
  redis.call('LTRIM', not_full, '0', '0')
else
  redis.call('DEL', not_full)
end
return 1
