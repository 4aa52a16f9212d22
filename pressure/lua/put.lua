-- Put one item (protocol Put, non-blocking form): the producer role is taken
-- and given back inside this script, so it is never held across round trips.
-- KEYS[1] - the queue list
-- KEYS[2] - :bound
-- KEYS[3] - :producer_free
-- KEYS[4] - :producer
-- KEYS[5] - :closed
-- KEYS[6] - :not_full
-- KEYS[7] - :stats:produced_messages
-- KEYS[8] - :stats:produced_bytes
-- ARGV[1] - client identifier
-- ARGV[2] - payload
-- ARGV[3] - '1' if the caller asked to block with a negative timeout
-- ARGV[4] - '1' if the caller took a :not_full element while waiting (it is
--           given back when another client holds the producer role)
-- return the new queue length (> 0) on success, or
--   -1 full (the role was taken and given back, nothing pushed)
--   -2 the producer role is held by another client and the queue is not full
--   -3 the queue is closed
--   -4 the queue does not exist
--   -7 negative timeout on a bounded queue (queue.Queue raises ValueError)
local raw = redis.call('GET', KEYS[2])
if not raw then return -4 end
local bound = tonumber(raw)
if not bound or bound < 0 or bound % 1 ~= 0 then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. KEYS[2])
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  -- pass the wake-up on: producers blocked on :not_full wake and see the close
  redis.call('LPUSH', KEYS[6], 1)
  redis.call('LTRIM', KEYS[6], 0, 0)
  return -3
end
if ARGV[3] == '1' and bound > 0 then return -7 end
local len = redis.call('LLEN', KEYS[1])
if not redis.call('RPOP', KEYS[3]) then
  if bound > 0 and len >= bound then return -1 end
  if ARGV[4] == '1' then
    -- the producer holding the role may be waiting for the permit we took
    redis.call('LPUSH', KEYS[6], 1)
    redis.call('LTRIM', KEYS[6], 0, 0)
  end
  return -2
end
redis.call('SET', KEYS[4], ARGV[1])
local result = -1
if bound == 0 or len < bound then
  len = redis.call('LPUSH', KEYS[1], ARGV[2])
  redis.call('INCR', KEYS[7])
  redis.call('INCRBY', KEYS[8], #ARGV[2])
  result = len
end
-- :not_full holds one element exactly while the queue is below its bound
if bound == 0 or len < bound then
  redis.call('LPUSH', KEYS[6], 1)
  redis.call('LTRIM', KEYS[6], 0, 0)
else
  redis.call('DEL', KEYS[6])
end
redis.call('LPUSH', KEYS[3], 1)
return result
