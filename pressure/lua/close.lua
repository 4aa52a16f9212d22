-- Close the queue (protocol Close): with the producer role, push two close
-- markers; wake producers blocked on :not_full and the waiting consumer.
-- KEYS[1] - :bound
-- KEYS[2] - :producer_free
-- KEYS[3] - :producer
-- KEYS[4] - :closed
-- KEYS[5] - :not_full
-- KEYS[6] - :consumer_free
-- KEYS[7] - :pressure:waiter
-- KEYS[8] - :pressure:lease
-- ARGV[1] - client identifier
-- ARGV[2] - inbox key prefix (:pressure:inbox:); the waiting consumer wakes
--           on the entry 's:' in its inbox
-- return 1 if closed now, 0 if it was closed already, -2 if the producer role
-- is held by another client, -4 if the queue does not exist
local bound_key, producer_free, producer = KEYS[1], KEYS[2], KEYS[3]
local closed, not_full, consumer_free = KEYS[4], KEYS[5], KEYS[6]
local waiter_key, lease_key = KEYS[7], KEYS[8]
local client_id, inbox_prefix = ARGV[1], ARGV[2]
if redis.call('EXISTS', bound_key) == 0 then return -4 end
if redis.call('EXISTS', closed) == 1 then return 0 end
if redis.call('LLEN', producer_free) == 0 then return -2 end
redis.call('LLEN', not_full)  -- read first: a wrong type fails before any write
redis.call('LLEN', consumer_free)
redis.call('SET', producer, client_id)
redis.call('LPUSH', closed, '1', '1')
redis.call('LPUSH', not_full, '1')
redis.call('LTRIM', not_full, '0', '0')
wake_waiter(waiter_key, lease_key, consumer_free, inbox_prefix)
return 1
