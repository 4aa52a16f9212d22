-- Read a range of a log (see log_append.lua) in one compact reply: a reader
-- that parses three strings instead of a dozen reply elements per entry.
-- Read only.
-- KEYS[1] - the log (a stream: :pressure:logs:<group>)
-- ARGV[1] - the first number to read
-- ARGV[2] - the last number to read (inclusive)
-- ARGV[3] - the most entries to return
-- return {meta, items, producers}: meta holds six numbers per entry in the log's order,
--   separated by spaces (its number, its seq, deliveries, taken-at ms, the length of its
--   item, the length of its producer); items and producers are the entries' items and
--   producers, concatenated; three empty strings if the range holds no entry
local log = KEYS[1]
local first, last, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local entries = redis.call('XRANGE', log, first .. '-0', last .. '-0', 'COUNT', count)
local meta, items, producers = {}, {}, {}
local m = 0
for n, entry in ipairs(entries) do
  -- fields i, s, d, t, p: the order log_append.lua writes them in
  local f = entry[2]
  local item, producer = f[2], f[10]
  meta[m + 1], meta[m + 2], meta[m + 3] = string.sub(entry[1], 1, -3), f[4], f[6]
  meta[m + 4], meta[m + 5], meta[m + 6] = f[8], #item, #producer
  m = m + 6
  items[n], producers[n] = item, producer
end
return {table.concat(meta, ' '), table.concat(items), table.concat(producers)}
