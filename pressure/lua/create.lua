-- Create the queue if it does not exist (protocol Create), else attach to it.
-- KEYS[1] - :bound
-- KEYS[2] - :producer_free
-- KEYS[3] - :consumer_free
-- KEYS[4] - :not_full
-- KEYS[5] - :closed
-- ARGV[1] - bound to store when creating (0 = unbounded)
-- return {1, bound} if created, {0, bound} if it already existed,
--        {-1, ''} if :bound is missing but other keys remain (a Delete is
--        running or was interrupted), so creating now would break the queue
local stored = redis.call('GET', KEYS[1])
if stored then
  return {0, stored}
end
if redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4], KEYS[5]) > 0 then
  return {-1, ''}
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('LPUSH', KEYS[2], 1)
redis.call('LPUSH', KEYS[3], 1)
redis.call('LPUSH', KEYS[4], 1)
return {1, ARGV[1]}
