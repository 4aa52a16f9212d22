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
-- return a flat list of 'what' and 'was' pairs for every key changed, or
-- {-4} if the queue does not exist
local raw = redis.call('GET', KEYS[2])
if not raw then return {-4} end
local bound = bound_of(raw)
if not bound then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. KEYS[2] .. ': set it first')
end
local changes = {}
local function exactly(key, n, what)
  local kind = redis.call('TYPE', key)['ok']
  local have = 0
  if kind == 'list' then have = redis.call('LLEN', key) elseif kind ~= 'none' then have = -1 end
  if have ~= n then
    redis.call('DEL', key)
    for _ = 1, n do redis.call('LPUSH', key, 1) end
    table.insert(changes, what)
    table.insert(changes, tostring(have))
  end
end
exactly(KEYS[3], 1, 'producer_free')
exactly(KEYS[4], 1, 'consumer_free')
local len = 0
if redis.call('TYPE', KEYS[1])['ok'] == ITEMS_TYPE then len = items_len(KEYS[1]) end
if bound == 0 or len < bound then exactly(KEYS[5], 1, 'not_full') else exactly(KEYS[5], 0, 'not_full') end
local closed = redis.call('LLEN', KEYS[6])
if closed > 0 and closed ~= 2 then exactly(KEYS[6], 2, 'closed') end
local waiter = redis.call('GET', KEYS[7])
if waiter then
  redis.call('DEL', KEYS[7], KEYS[8])
  table.insert(changes, 'waiter')
  table.insert(changes, waiter)
end
return changes
