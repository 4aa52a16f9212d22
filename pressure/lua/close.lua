-- Close the queue (protocol Close): with the producer role, push two close
-- markers; also wake producers blocked on :not_full so they see the close.
-- KEYS[1] - :bound
-- KEYS[2] - :producer_free
-- KEYS[3] - :producer
-- KEYS[4] - :closed
-- KEYS[5] - :not_full
-- ARGV[1] - client identifier
-- return 1 if closed now, 0 if it was closed already, -2 if the producer role
-- is held by another client, -4 if the queue does not exist
if redis.call('EXISTS', KEYS[1]) == 0 then return -4 end
if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
if not redis.call('RPOP', KEYS[2]) then return -2 end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('LPUSH', KEYS[4], 1, 1)
redis.call('LPUSH', KEYS[5], 1)
redis.call('LTRIM', KEYS[5], 0, 0)
redis.call('LPUSH', KEYS[2], 1)
return 1
