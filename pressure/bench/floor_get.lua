-- The floor of a get, for bench --server-cost (not a queue's script: a yardstick for
-- get.lua). The protocol's non-blocking Get, and what delivering without losing an item
-- takes, as one script of one key: the queue exists, the consumer role is free (checked, not
-- held), the consumer named, the items popped, :stats:consumed_* counted, a permit in
-- :not_full, and what is taken kept in Redis until the client has it (a single item as an
-- in-flight entry '<seq>:1:<ms>:<item>', a batch as it is in the held list after its header
-- 'h:<first seq>:<ms>:'; the client drops them, as pressure's default mode does). None of
-- what pressure adds: no waiting consumer registered, leased or woken, no consumer record
-- for recovery after a crash, no inbox, no closed-queue drain, no delayed items, ttl, ttr,
-- utube key or redelivery count, no check of a key's type before the first write.
-- KEYS[1]  - the items (a list), whose name <base> names the others: :consumer_free, :bound,
--            :consumer, :not_full, :stats:consumed_messages, :stats:consumed_bytes,
--            :pressure:delivery_seq, and this consumer's :pressure:inflight:<ARGV[1]> and
--            :pressure:held:<ARGV[1]>
-- ARGV[1]  - consumer identifier
-- ARGV[2]  - '' for one item (its entry), else how many at most (a batch)
-- return the entry, or the batch's items (oldest first), or -2 the consumer role is held,
--   -4 no queue, -5 empty
local items_key = KEYS[1]
local me, count = ARGV[1], ARGV[2]
local values = redis.call('MGET', items_key .. ':bound', items_key .. ':consumer')
if not values[1] then return -4 end
if redis.call('LLEN', items_key .. ':consumer_free') == 0 then return -2 end
local items
if count == '' then
  items = {redis.call('RPOP', items_key)}
else
  items = redis.call('RPOP', items_key, count)
end
if not items or not items[1] then return -5 end
if values[2] ~= me then redis.call('SET', items_key .. ':consumer', me) end
local n, bytes = #items, 0
for i = 1, n do bytes = bytes + #items[i] end
-- (INCR for one: a Lua number passed to a command is formatted, as put.lua and get.lua avoid)
local seq
if n == 1 then
  redis.call('INCR', items_key .. ':stats:consumed_messages')
  seq = redis.call('INCR', items_key .. ':pressure:delivery_seq')
else
  redis.call('INCRBY', items_key .. ':stats:consumed_messages', n)
  seq = redis.call('INCRBY', items_key .. ':pressure:delivery_seq', n)
end
redis.call('INCRBY', items_key .. ':stats:consumed_bytes', bytes)
local not_full = items_key .. ':not_full'
if redis.call('LLEN', not_full) == 0 then redis.call('LPUSH', not_full, '1') end
local now = redis.call('TIME')
if count == '' then
  local entry = seq .. ':1:' .. now[1] .. string.sub('00000' .. now[2], -6, -4) .. ':' .. items[1]
  redis.call('LPUSH', items_key .. ':pressure:inflight:' .. me, entry)
  return entry
end
local held = {'h:' .. (seq - n + 1) .. ':' .. now[1] .. string.sub('00000' .. now[2], -6, -4) .. ':'}
for i = n, 1, -1 do held[n - i + 2] = items[i] end
redis.call('RPUSH', items_key .. ':pressure:held:' .. me, unpack(held))
return items
