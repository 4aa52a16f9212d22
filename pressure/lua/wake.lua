-- Wake the consumer registered as a queue's waiter, if any, and leave it registered:
-- the wake-up entry 's:' in its inbox (one is enough), as a put does (nudge_waiter).
-- Its BLMOVE returns and its get looks again; nothing leaves the queue. An Executor's
-- workers are stopped this way: a worker told to stop ends its wait once woken
-- instead of at the end of its slice.
-- KEYS[1] - :pressure:waiter
-- KEYS[2] - :pressure:lease
-- ARGV[1] - inbox key prefix (:pressure:inbox:)
-- return 1 if a waiter was woken, 0 if none is registered
local waiter_key, lease_key = KEYS[1], KEYS[2]
local inbox_prefix = ARGV[1]
local waiter = redis.call('GET', waiter_key)
if not waiter or redis.call('GET', lease_key) ~= waiter then return 0 end
nudge_waiter(waiter, waiter, inbox_prefix)
return 1
