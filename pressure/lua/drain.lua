-- Discard every queued item, delayed ones too, with the consumer role (shutdown(immediate=True)).
-- Each item discarded counts as done (lib.lua count_ended).
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :consumer_free
-- KEYS[4] - :consumer
-- KEYS[5] - :not_full
-- KEYS[6] - :stats:produced_messages
-- KEYS[7] - :pressure:tasks_done
-- KEYS[8] - :pressure:discarded
-- KEYS[9] - :pressure:all_tasks_done (stream that wakes join())
-- KEYS[10] - :pressure:delayed (delayed items: discarded too)
-- KEYS[11] - :pressure:utube (the items waiting behind each utube key, in '<KEYS[11]>:<key>':
--            discarded too, with their states in '<KEYS[11]>_meta:<key>')
-- KEYS[12] - :pressure:redeliveries (the states of queued copies: discarded with them)
-- KEYS[13] - :pressure:meta (the states of delayed copies, fields 'z...': discarded with them)
-- ARGV[1] - client identifier
-- return the number of items discarded, -2 if the consumer role is held by
-- another client, -4 if the queue does not exist
local items_key, bound_key, consumer_free = KEYS[1], KEYS[2], KEYS[3]
local consumer, not_full, produced_messages = KEYS[4], KEYS[5], KEYS[6]
local tasks_done, discarded, all_tasks_done = KEYS[7], KEYS[8], KEYS[9]
local delayed, utube = KEYS[10], KEYS[11]
local copies, meta = KEYS[12], KEYS[13]
local client_id = ARGV[1]
if redis.call('EXISTS', bound_key) == 0 then return -4 end
local n = items_len(items_key)  -- read first: a wrong type fails before any write
local waiting = 0
if redis.call('EXISTS', delayed) == 1 then waiting = redis.call('ZCARD', delayed) end
local utube_keys = redis.call('HKEYS', utube)
for _, key in ipairs(utube_keys) do waiting = waiting + redis.call('LLEN', utube .. ':' .. key) end
local produced = counter(produced_messages)
local done = counter(tasks_done)
counter(discarded)
redis.call('LLEN', not_full)
if redis.call('LLEN', consumer_free) == 0 then return -2 end
redis.call('SET', consumer, client_id)
n = n + waiting
if n > 0 then
  redis.call('DEL', items_key, delayed)
  for _, key in ipairs(utube_keys) do redis.call('DEL', utube .. ':' .. key, utube .. '_meta:' .. key) end
  copies_forget(copies)
  for _, field in ipairs(redis.call('HKEYS', meta)) do
    if string.sub(field, 1, 1) == 'z' then redis.call('HDEL', meta, field) end
  end
  -- what is left of each key is its current item, if a consumer holds it (its ack ends the key)
  redis.call('DEL', utube)
  redis.call('INCRBY', discarded, n)
  count_ended(tasks_done, all_tasks_done, produced, done, n)
end
redis.call('LPUSH', not_full, '1')
redis.call('LTRIM', not_full, '0', '0')
return n
