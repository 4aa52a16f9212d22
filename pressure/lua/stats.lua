-- The queue's tasks by state and its lifecycle counters, read in one atomic step
-- (statistics(); tarantool/queue's statistics()). Read-only.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :pressure:delayed (sorted set of delayed items)
-- KEYS[3] - :pressure:dead (the dead letters: buried, expired, delivered too often)
-- KEYS[4] - :pressure:consumers (hash: identifier -> record; names their lists)
-- KEYS[5] - :pressure:counts (hash of lifecycle counters)
-- ARGV[1] - inbox key prefix (:pressure:inbox:)
-- ARGV[2] - in-flight key prefix (:pressure:inflight:)
-- ARGV[3] - held-batch key prefix (:pressure:held:)
-- return {ready, delayed, taken, buried, counter name, value, ...}: taken counts every
-- item a consumer holds (in flight, in its inbox, in a held batch), wake-ups left out
local items_key, delayed, dead_letters = KEYS[1], KEYS[2], KEYS[3]
local consumers, counts_key = KEYS[4], KEYS[5]
local inbox_prefix, inflight_prefix, held_prefix = ARGV[1], ARGV[2], ARGV[3]
local taken = 0
for _, id in ipairs(redis.call('HKEYS', consumers)) do
  for _, key in ipairs({inbox_prefix .. id, inflight_prefix .. id}) do
    taken = taken + redis.call('LLEN', key) - #redis.call('LPOS', key, 's:', 'COUNT', '0')
  end
  local held = redis.call('LLEN', held_prefix .. id)
  if held > 0 then taken = taken + held - 1 end  -- its header, then the items
end
local result = {items_len(items_key), redis.call('ZCARD', delayed), taken, redis.call('LLEN', dead_letters)}
for _, v in ipairs(redis.call('HGETALL', counts_key)) do result[#result + 1] = v end
return result
