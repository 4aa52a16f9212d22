-- Move dead letters back to the head of the queue, oldest first, with a fresh
-- delivery count (they count as not consumed again).
-- KEYS[1] - :pressure:dead (entries '<seq>:<deliveries>:<ms>:<payload>', newest first)
-- KEYS[2] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[3] - :stats:consumed_messages
-- KEYS[4] - :stats:consumed_bytes
-- KEYS[5] - :bound
-- KEYS[6] - :not_full
-- ARGV[1] - how many to move (-1 = all)
-- return how many moved
local n = tonumber(ARGV[1])
local entries = redis.call('LRANGE', KEYS[1], 0, -1)
if n < 0 or n > #entries then n = #entries end
-- the oldest n are at the right end; push the newest of them first so the oldest is next out
for i = #entries - n + 1, #entries do
  local payload = string.match(entries[i], '^[^:]*:[^:]*:[^:]*:(.*)$') or entries[i]
  items_return(KEYS[2], payload)
  redis.call('DECR', KEYS[3])
  redis.call('DECRBY', KEYS[4], items_size(payload))
end
if n >= #entries then
  redis.call('DEL', KEYS[1])
elseif n > 0 then
  redis.call('LTRIM', KEYS[1], 0, #entries - n - 1)
end
local bound = bound_of(redis.call('GET', KEYS[5]))
if bound then
  keep_permit(KEYS[6], items_len(KEYS[2]), bound, redis.call('LLEN', KEYS[6]))
end
return n
