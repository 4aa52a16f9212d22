-- The floor of a put, for bench --server-cost (not a queue's script: a yardstick for
-- put.lua). The protocol's non-blocking Put and nothing more, as one script of one key:
-- the queue exists and is open, the producer role is free (checked, not held across calls,
-- as put.lua does), a permit in :not_full (no permit: full), the producer named, the items
-- pushed, :stats:produced_* counted, the permit kept as the bound says. None of what
-- pressure adds: no waiter woken, no delayed items moved, no ttl, ttr or utube key, no
-- partial put_many under a bound, no check of a key's type before the first write.
-- KEYS[1]  - the items (a list), whose name <base> names the others: :bound, :producer,
--            :closed, :producer_free, :not_full, :stats:produced_messages,
--            :stats:produced_bytes
-- ARGV[1]  - client identifier
-- ARGV[2..] - the items, in order (one for a put, more for a put_many)
-- return the queue length after the put, or -1 full, -2 the producer role is held, -3 closed,
--   -4 no queue
local items_key = KEYS[1]
local client_id = ARGV[1]
local values = redis.call('MGET', items_key .. ':bound', items_key .. ':producer')
if not values[1] then return -4 end
if redis.call('EXISTS', items_key .. ':closed') == 1 then return -3 end
if redis.call('LLEN', items_key .. ':producer_free') == 0 then return -2 end
local not_full = items_key .. ':not_full'
local permits = redis.call('LLEN', not_full)
if permits == 0 then return -1 end
if values[2] ~= client_id then redis.call('SET', items_key .. ':producer', client_id) end
local n, bytes = #ARGV - 1, 0
for i = 2, #ARGV do bytes = bytes + #ARGV[i] end
if n == 1 then
  redis.call('INCR', items_key .. ':stats:produced_messages')
else
  redis.call('INCRBY', items_key .. ':stats:produced_messages', n)
end
redis.call('INCRBY', items_key .. ':stats:produced_bytes', bytes)
local len = redis.call('LPUSH', items_key, unpack(ARGV, 2))
local bound = tonumber(values[1])
if bound > 0 and len >= bound then
  redis.call('DEL', not_full)
elseif permits > 1 then
  redis.call('LTRIM', not_full, '0', '0')
end
return len
