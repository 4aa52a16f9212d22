-- Read the queue's state without taking a role (protocol Exists, Length, Closed).
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :closed
-- return {exists (0/1), length, bound ('' if missing), closed (0/1)}
local items_key, bound_key, closed = KEYS[1], KEYS[2], KEYS[3]
local bound = redis.call('GET', bound_key)
if not bound then return {0, 0, '', 0} end
return {1, items_len(items_key), bound, redis.call('EXISTS', closed)}
