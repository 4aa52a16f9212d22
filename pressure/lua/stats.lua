-- The queue's tasks by state and its lifecycle counters, read in one atomic step
-- (statistics(), and the CLI's and the metrics' figures of a queue: every view counts by
-- this script; tarantool/queue's statistics()). Read-only.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :pressure:delayed (sorted set of delayed items)
-- KEYS[3] - :pressure:dead (the dead letters: buried, expired, delivered too often)
-- KEYS[4] - :pressure:consumers (hash: identifier -> record; names their lists)
-- KEYS[5] - :pressure:counts (hash of lifecycle counters)
-- KEYS[6] - :stats:produced_messages
-- KEYS[7] - :pressure:tasks_done
-- ARGV[1] - inbox key prefix (:pressure:inbox:)
-- ARGV[2] - in-flight key prefix (:pressure:inflight:)
-- ARGV[3] - held-batch key prefix (:pressure:held:)
-- return {ready, delayed, taken, buried, consumers, unfinished, counter name, value, ...}:
-- taken counts every item a consumer holds (lib.lua items_held), consumers the registered
-- consumers (those with a record in KEYS[4]: from their first get until they leave, or are
-- found dead and their items taken back), unfinished the tasks not done (lib.lua unfinished_of)
local items_key, delayed, dead_letters = KEYS[1], KEYS[2], KEYS[3]
local consumers, counts_key, produced_messages = KEYS[4], KEYS[5], KEYS[6]
local tasks_done = KEYS[7]
local inbox_prefix, inflight_prefix, held_prefix = ARGV[1], ARGV[2], ARGV[3]
local taken, registered = items_held(consumers, inbox_prefix, inflight_prefix, held_prefix)
local result = {items_len(items_key), redis.call('ZCARD', delayed), taken, redis.call('LLEN', dead_letters),
                registered, unfinished_of(counter(produced_messages), counter(tasks_done))}
for _, v in ipairs(redis.call('HGETALL', counts_key)) do result[#result + 1] = v end
return result
