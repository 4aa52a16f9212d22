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
if redis.call('EXISTS', KEYS[1]) == 0 then return -4 end
if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
if redis.call('LLEN', KEYS[2]) == 0 then return -2 end
redis.call('LLEN', KEYS[5])  -- read first: a wrong type fails before any write
redis.call('LLEN', KEYS[6])
redis.call('SET', KEYS[3], ARGV[1])
redis.call('LPUSH', KEYS[4], 1, 1)
redis.call('LPUSH', KEYS[5], 1)
redis.call('LTRIM', KEYS[5], 0, 0)
wake_waiter(KEYS[7], KEYS[8], KEYS[6], ARGV[2])
return 1
