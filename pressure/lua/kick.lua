-- Move dead letters back to the head of the queue, oldest first, with a fresh
-- delivery count (they count as unfinished tasks again, and as not consumed again: each leaves
-- :stats:consumed_* as an item given back does, except one that expired, which no get ever
-- handed out and so was never counted there: get.lua expire, entries 'expired:...').
-- KEYS[1]  - :pressure:dead (entries '<seq>:<deliveries>:<ms>:<payload>', newest first)
-- KEYS[2]  - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[3]  - :stats:consumed_messages
-- KEYS[4]  - :stats:consumed_bytes
-- KEYS[5]  - :bound
-- KEYS[6]  - :not_full
-- KEYS[7]  - :pressure:counts (lifecycle counters: 'kick', how many items kicked; 'kick_expired',
--            how many of them had expired, and so left :stats:consumed_* unchanged)
-- KEYS[8]  - :pressure:redeliveries (each kicked copy's fresh state goes in at the head, with
--            it, ahead of the states of its queued copies; lib.lua copies_push)
-- KEYS[9]  - :pressure:tasks_done (a dead letter counted as done; kicked back, it is
--            unfinished again: lib.lua tasks_back)
-- KEYS[10] - :pressure:delayed (delayed items count against the bound with the queued ones:
--            :not_full is kept for both)
-- ARGV[1] - how many to move (-1 = all)
-- return how many moved
local dead_letters, items_key, consumed_messages = KEYS[1], KEYS[2], KEYS[3]
local consumed_bytes, bound_key, not_full = KEYS[4], KEYS[5], KEYS[6]
local counts_key, copies, tasks_done = KEYS[7], KEYS[8], KEYS[9]
local delayed = KEYS[10]
local how_many = ARGV[1]
local n = tonumber(how_many)
counter(tasks_done)  -- read first: a bad counter fails before any write
local entries = redis.call('LRANGE', dead_letters, '0', '-1')
if n < 0 or n > #entries then n = #entries end
-- the oldest n are at the right end; push the newest of them first so the oldest is next out
local expired = 0
for i = #entries - n + 1, #entries do
  local seq, payload = string.match(entries[i], '^([^:]*):[^:]*:[^:]*:(.*)$')
  payload = payload or entries[i]
  items_return(items_key, payload)
  copies_push(copies, payload, NO_META, true)
  if seq == 'expired' then
    expired = expired + 1
  else
    redis.call('DECR', consumed_messages)
    redis.call('DECRBY', consumed_bytes, items_size(payload))
  end
end
if n >= #entries then
  redis.call('DEL', dead_letters)
elseif n > 0 then
  redis.call('LTRIM', dead_letters, '0', #entries - n - 1)
end
if n > 0 then
  redis.call('HINCRBY', counts_key, 'kick', n)
  if expired > 0 then redis.call('HINCRBY', counts_key, 'kick_expired', expired) end
  tasks_back(tasks_done, n)
end
local bound = bound_of(redis.call('GET', bound_key))
if bound then
  keep_permit(not_full, items_len(items_key) + redis.call('ZCARD', delayed), bound,
              redis.call('LLEN', not_full))
end
return n
