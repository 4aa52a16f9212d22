-- The queue's tasks by state and its lifecycle counters, read in one atomic step
-- (statistics(); tarantool/queue's statistics()). Read-only.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :pressure:delayed (sorted set of delayed items)
-- KEYS[3] - :pressure:dead (the dead letters: buried, expired, delivered too often)
-- KEYS[4] - :pressure:consumers (hash: identifier -> record; names their lists)
-- KEYS[5] - :pressure:counts (hash of lifecycle counters)
-- KEYS[6] - :pressure:meta (ttl, ttr and utube key of items put with them)
-- KEYS[7] - :pressure:utube (the lists of items waiting behind a utube key are named from it)
-- ARGV[1] - inbox key prefix (:pressure:inbox:)
-- ARGV[2] - in-flight key prefix (:pressure:inflight:)
-- ARGV[3] - held-batch key prefix (:pressure:held:)
-- return {ready, delayed, taken, buried, counter name, value, ...}: ready and delayed as the gets
-- would find them now (lib.lua queue_counts: due items are ready, not delayed; items past their
-- ttl are neither, and counted in 'expired' at once, as a get drops them); taken counts every
-- item a consumer holds (in flight, in its inbox, in a held batch), wake-ups left out
local items_key, delayed, dead_letters = KEYS[1], KEYS[2], KEYS[3]
local consumers, counts_key, meta, utube = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local inbox_prefix, inflight_prefix, held_prefix = ARGV[1], ARGV[2], ARGV[3]
local taken = 0
for _, id in ipairs(redis.call('HKEYS', consumers)) do
  for _, key in ipairs({inbox_prefix .. id, inflight_prefix .. id}) do
    taken = taken + redis.call('LLEN', key) - #redis.call('LPOS', key, 's:', 'COUNT', '0')
  end
  local held = redis.call('LLEN', held_prefix .. id)
  if held > 0 then taken = taken + held - 1 end  -- its header, then the items
end
local ready, waiting, expired = queue_counts(items_key, delayed, meta, utube, nil, items_len, items_range)
local result = {ready, waiting, taken, redis.call('LLEN', dead_letters)}
local flat = redis.call('HGETALL', counts_key)
for i = 1, #flat, 2 do
  local name, value = flat[i], flat[i + 1]
  if name == 'expired' then value, expired = tonumber(value) + expired, 0 end
  result[#result + 1], result[#result + 2] = name, value
end
if expired > 0 then result[#result + 1], result[#result + 2] = 'expired', expired end
return result
