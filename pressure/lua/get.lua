-- Get one item (protocol Get, non-blocking form).
-- KEYS[1] - the queue list
-- KEYS[2] - :bound
-- KEYS[3] - :consumer_free
-- KEYS[4] - :consumer
-- KEYS[5] - :closed
-- KEYS[6] - :not_full
-- KEYS[7] - :stats:consumed_messages
-- KEYS[8] - :stats:consumed_bytes
-- ARGV[1] - client identifier
-- ARGV[2] - '1' to keep the consumer role when the queue is empty and open:
--           the caller then waits in BRPOP <list> <:closed> and must finish
--           with get_finish.lua (or give the role back with release.lua)
-- ARGV[3] - '1' if the caller asked to block with a negative timeout
-- return the payload, or
--   -2 the consumer role is held by another client (and items are waiting,
--      or the caller blocks)
--   -3 the queue is closed and empty
--   -4 the queue does not exist
--   -5 the queue is empty (role given back)
--   -6 the queue is empty and the caller now holds the consumer role
--   -7 negative timeout (queue.Queue raises ValueError)
local raw = redis.call('GET', KEYS[2])
if not raw then return -4 end
local bound = tonumber(raw)
if not bound or bound < 0 or bound % 1 ~= 0 then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. KEYS[2])
end
local len = redis.call('LLEN', KEYS[1])
local closed = redis.call('EXISTS', KEYS[5]) == 1
if len == 0 and closed then return -3 end
if ARGV[3] == '1' then return -7 end
if not redis.call('RPOP', KEYS[3]) then
  -- a non-blocking caller facing a holder that waits on an empty queue: Empty
  if len == 0 and ARGV[2] ~= '1' then return -5 end
  return -2
end
redis.call('SET', KEYS[4], ARGV[1])
local item = false
if len > 0 then
  item = redis.call('RPOP', KEYS[1])
  len = len - 1
  redis.call('INCR', KEYS[7])
  redis.call('INCRBY', KEYS[8], #item)
end
if bound == 0 or len < bound then
  redis.call('LPUSH', KEYS[6], 1)
  redis.call('LTRIM', KEYS[6], 0, 0)
end
if item then
  redis.call('LPUSH', KEYS[3], 1)
  return item
end
if ARGV[2] == '1' then return -6 end
redis.call('LPUSH', KEYS[3], 1)
return -5
