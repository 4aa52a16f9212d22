-- Create the queue if it does not exist (protocol Create), else attach to it.
-- A fresh queue starts with none of pressure's keys a queue of the same name
-- left behind (a plain spec client's Delete cannot know them).
-- KEYS[1] - :bound
-- KEYS[2] - :producer_free
-- KEYS[3] - :consumer_free
-- KEYS[4] - :not_full
-- KEYS[5] - :closed
-- KEYS[6] - :pressure:kind ('lifo' or 'priority'; missing for a FIFO queue)
-- KEYS[7] - :pressure:consumers
-- KEYS[8] - :pressure:bound_unset (exists while the bound is 0 because no creator named one)
-- KEYS[9] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[10] - :pressure:delayed (delayed items count against the bound)
-- KEYS[11] - :pressure:serializer (the name of the serializer the queue was created with)
-- KEYS[12..] - pressure's other fixed keys of the queue
-- ARGV[1] - bound to store when creating (0 = unbounded)
-- ARGV[2] - the kind of queue: 'fifo', 'lifo' or 'priority'
-- ARGV[3] - inbox key prefix (:pressure:inbox:)
-- ARGV[4] - in-flight key prefix (:pressure:inflight:)
-- ARGV[5] - held-batch key prefix (:pressure:held:)
-- ARGV[6] - :pressure:logs (the set naming the logs kept beside the queue)
-- ARGV[7] - '1' if the caller names its bound (ARGV[1], 0 included), '' if it names
--           none: then a queue it creates is unbounded with its bound unset (KEYS[8]),
--           and the first caller that names one sets it (as set_bound.lua does); a
--           bound named, or created by a plain spec client, stays as it is
-- ARGV[8] - the name of the creator's serializer, recorded in KEYS[11] when this call
--           creates the queue ('': nothing recorded, the serializer is unknown); never
--           changed after (a queue a plain spec client created has none)
-- return {1, bound} if created, {0, bound} if it already existed (its bound now),
--        {-1, ''} if :bound is missing but other keys remain (a Delete is
--        running or was interrupted), so creating now would break the queue,
--        {-2, kind} if it exists as another kind of queue
local bound_key, producer_free, consumer_free = KEYS[1], KEYS[2], KEYS[3]
local not_full, closed, kind_key = KEYS[4], KEYS[5], KEYS[6]
local consumers, bound_unset, items_key, delayed = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local bound, queue_kind, inbox_prefix = ARGV[1], ARGV[2], ARGV[3]
local inflight_prefix, held_prefix, logs = ARGV[4], ARGV[5], ARGV[6]
local named, serializer_key, serializer = ARGV[7] == '1', KEYS[11], ARGV[8]
local stored = redis.call('GET', bound_key)
if stored then
  local kind = redis.call('GET', kind_key) or 'fifo'
  if kind ~= queue_kind then return {-2, kind} end
  if named and redis.call('EXISTS', bound_unset) == 1 then
    -- the first bound named: it is the queue's from now on
    local len = items_len(items_key) + redis.call('ZCARD', delayed)
    store_bound(bound_key, bound_unset, not_full, bound, len, redis.call('LLEN', not_full))
    return {0, bound}
  end
  return {0, stored}
end
if not queue_gone(bound_key, producer_free, consumer_free, not_full, closed) then
  return {-1, ''}
end
local others = {kind_key, bound_unset, delayed, serializer_key}
for i = 12, #KEYS do table.insert(others, KEYS[i]) end
forget_queue(consumers, inbox_prefix, inflight_prefix, held_prefix, logs, others)
redis.call('DEL', consumers)
redis.call('SET', bound_key, bound)
redis.call('LPUSH', producer_free, '1')
redis.call('LPUSH', consumer_free, '1')
redis.call('LPUSH', not_full, '1')
if queue_kind ~= 'fifo' then redis.call('SET', kind_key, queue_kind) end
if not named then redis.call('SET', bound_unset, '1') end
if serializer ~= '' then redis.call('SET', serializer_key, serializer) end
return {1, bound}
