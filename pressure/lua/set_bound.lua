-- Change the bound of an existing queue and bring :not_full in line with it (delayed
-- items count against the bound, as everywhere).
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :not_full
-- KEYS[4] - :pressure:bound_unset (goes: the bound is named now; see create.lua)
-- KEYS[5] - :pressure:delayed
-- ARGV[1] - the new bound (0 = unbounded)
-- ARGV[2] - '' to set it, 'unset' to set it only if the bound is unset (KEYS[4])
-- return 1 if set, 0 if not ('unset': the bound is named already), or -4 if the
-- queue does not exist
local items_key, bound_key, not_full, bound_unset = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local delayed = KEYS[5]
local new_bound, only_unset = ARGV[1], ARGV[2] == 'unset'
if redis.call('EXISTS', bound_key) == 0 then return -4 end
if only_unset and redis.call('EXISTS', bound_unset) == 0 then return 0 end
-- read first: a wrong type fails before any write
local len = items_len(items_key) + redis.call('ZCARD', delayed)
store_bound(bound_key, bound_unset, not_full, new_bound, len, redis.call('LLEN', not_full))
return 1
