-- Read the queue's state without taking a role or changing anything (protocol Exists, Length,
-- Closed; qsize(), empty(), full(), maxsize, closed). Its items are counted as the gets would
-- find them now (lib.lua queue_counts): due delayed items are ready, items past their ttl are not.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :closed
-- KEYS[4] - :pressure:delayed (sorted set of delayed items by due time)
-- KEYS[5] - :pressure:meta (ttl, ttr and utube key of items put with them)
-- KEYS[6] - :pressure:utube (the lists of items waiting behind a utube key are named from it)
-- ARGV[1] - how many ready items to count at most: '' all (qsize()), '1' (empty(), full()...)
-- return {exists (0/1), ready (up to ARGV[1]), bound ('' if missing), closed (0/1), held
--   (the items queued and delayed: what the bound holds, as put.lua counts it)}
local items_key, bound_key, closed, delayed = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local meta, utube = KEYS[5], KEYS[6]
local most = tonumber(ARGV[1])
local bound = redis.call('GET', bound_key)
if not bound then return {0, 0, '', 0, 0} end
local ready, _, _, held = queue_counts(items_key, delayed, meta, utube, most, items_len, items_range)
return {1, ready, bound, redis.call('EXISTS', closed), held}
