-- Operator repair: force the queue's tokens back to the protocol invariants,
-- whoever holds them. Use when no client is acting (a live waiter simply
-- registers again). Items are never touched.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :producer_free
-- KEYS[4] - :consumer_free
-- KEYS[5] - :not_full
-- KEYS[6] - :closed
-- KEYS[7] - :pressure:waiter
-- KEYS[8] - :pressure:lease
-- KEYS[9] - :pressure:delayed (delayed items count against the bound, as in put.lua)
-- return a flat list of 'what' and 'was' pairs for every key changed, or
-- {-4} if the queue does not exist
local items_key, bound_key, producer_free = KEYS[1], KEYS[2], KEYS[3]
local consumer_free, not_full, closed = KEYS[4], KEYS[5], KEYS[6]
local waiter_key, lease_key, delayed = KEYS[7], KEYS[8], KEYS[9]
local raw = redis.call('GET', bound_key)
if not raw then return {-4} end
local bound = bound_of(raw)
if not bound then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. bound_key .. ': set it first')
end
local changes = {}
local function exactly(key, n, what)
  local kind = redis.call('TYPE', key)['ok']
  local have = 0
  if kind == 'list' then have = redis.call('LLEN', key) elseif kind ~= 'none' then have = -1 end
  if have ~= n then
    redis.call('DEL', key)
    for _ = 1, n do redis.call('LPUSH', key, '1') end
    table.insert(changes, what)
    table.insert(changes, tostring(have))
  end
end
exactly(producer_free, 1, 'producer_free')
exactly(consumer_free, 1, 'consumer_free')
local len = 0
if redis.call('TYPE', items_key)['ok'] == ITEMS_TYPE then len = items_len(items_key) end
if redis.call('TYPE', delayed)['ok'] == 'zset' then len = len + redis.call('ZCARD', delayed) end
if bound == 0 or len < bound then exactly(not_full, 1, 'not_full') else exactly(not_full, 0, 'not_full') end
local markers = redis.call('LLEN', closed)
if markers > 0 and markers ~= 2 then exactly(closed, 2, 'closed') end
local waiter = redis.call('GET', waiter_key)
if waiter then
  redis.call('DEL', waiter_key, lease_key)
  table.insert(changes, 'waiter')
  table.insert(changes, waiter)
end
return changes
