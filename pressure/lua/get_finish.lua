-- Finish a blocking Get after BRPOP <list> <:closed> answered, and give the
-- consumer role back. Only the holder's own call has any effect on the role.
-- KEYS[1] - the queue list
-- KEYS[2] - :bound
-- KEYS[3] - :consumer_free
-- KEYS[4] - :consumer
-- KEYS[5] - :closed
-- KEYS[6] - :not_full
-- KEYS[7] - :stats:consumed_messages
-- KEYS[8] - :stats:consumed_bytes
-- ARGV[1] - client identifier (the role holder)
-- ARGV[2] - 'item' if BRPOP returned an item, 'closed' if it took a close marker
-- ARGV[3] - the item's length in bytes
-- return 0 (item counted), -3 (closed), -4 (the queue was deleted meanwhile)
local raw = redis.call('GET', KEYS[2])
local result = 0
if ARGV[2] == 'item' then
  redis.call('INCR', KEYS[7])
  redis.call('INCRBY', KEYS[8], tonumber(ARGV[3]))
  local bound = tonumber(raw)
  if bound and (bound == 0 or redis.call('LLEN', KEYS[1]) < bound) then
    redis.call('LPUSH', KEYS[6], 1)
    redis.call('LTRIM', KEYS[6], 0, 0)
  end
else
  -- put the close marker back, so :closed keeps the two elements Close pushed
  if redis.call('LLEN', KEYS[5]) < 2 then redis.call('LPUSH', KEYS[5], 1) end
  result = -3
end
if not raw then result = -4 end
if redis.call('GET', KEYS[4]) == ARGV[1] and redis.call('LLEN', KEYS[3]) == 0 then
  redis.call('LPUSH', KEYS[3], 1)
end
return result
