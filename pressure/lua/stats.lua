-- The queue's tasks by state and its lifecycle counters, read in one atomic step
-- (statistics(), and the CLI's and the metrics' figures of a queue: every view counts by
-- this script; tarantool/queue's statistics()). Read-only.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :pressure:delayed (sorted set of delayed items)
-- KEYS[3] - :pressure:dead (the dead letters: buried, expired, delivered too often)
-- KEYS[4] - :pressure:consumers (hash: identifier -> record; names their lists)
-- KEYS[5] - :pressure:counts (hash of lifecycle counters)
-- KEYS[6] - :pressure:meta (ttl, ttr and utube key of items put with them)
-- KEYS[7] - :pressure:utube (the lists of items waiting behind a utube key are named from it)
-- KEYS[8] - :stats:produced_messages
-- KEYS[9] - :pressure:tasks_done
-- KEYS[10] - :pressure:redeliveries (the states of queued copies; lib.lua copies_push)
-- ARGV[1] - inbox key prefix (:pressure:inbox:)
-- ARGV[2] - in-flight key prefix (:pressure:inflight:)
-- ARGV[3] - held-batch key prefix (:pressure:held:)
-- return {ready, delayed, taken, buried, consumers, unfinished, redelivered, counter name, value,
-- ...}: ready
-- and delayed as the gets would find them now (lib.lua queue_counts: due items are ready, not
-- delayed; items past their ttl are neither, and counted in 'expired' at once, as a get drops
-- them); taken counts every item a consumer holds (lib.lua items_held), consumers the registered
-- consumers (those with a record in KEYS[4]: from their first get until they leave, or are
-- found dead and their items taken back), unfinished the tasks not done (lib.lua unfinished_of),
-- redelivered the queued copies with a state of their own (lib.lua copies_count) and the due
-- ones' (queue_counts: a due item is queued, whether or not a put or get has moved it in yet)
local items_key, delayed, dead_letters = KEYS[1], KEYS[2], KEYS[3]
local consumers, counts_key, meta, utube = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local produced_messages, tasks_done, copies = KEYS[8], KEYS[9], KEYS[10]
local inbox_prefix, inflight_prefix, held_prefix = ARGV[1], ARGV[2], ARGV[3]
local taken, registered = items_held(consumers, inbox_prefix, inflight_prefix, held_prefix)
local ready, waiting, expired, _, stated_due = queue_counts(items_key, delayed, meta, utube, nil, items_len,
                                                           items_range)
local result = {ready, waiting, taken, redis.call('LLEN', dead_letters),
                registered, unfinished_of(counter(produced_messages), counter(tasks_done)),
                copies_count(copies, items_len(items_key)) + stated_due}
local flat = redis.call('HGETALL', counts_key)
for i = 1, #flat, 2 do
  local name, value = flat[i], flat[i + 1]
  if name == 'expired' then value, expired = tonumber(value) + expired, 0 end
  result[#result + 1], result[#result + 2] = name, value
end
if expired > 0 then result[#result + 1], result[#result + 2] = 'expired', expired end
return result
