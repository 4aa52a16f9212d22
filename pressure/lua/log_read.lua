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
for n, entry in ipairs(entries) do
  local fields, f = entry[2], {}
  for j = 1, #fields, 2 do f[fields[j]] = fields[j + 1] end
  local item, producer = f['i'] or '', f['p'] or ''
  meta[n] = string.match(entry[1], '^(%d+)-') .. ' ' .. (f['s'] or '0') .. ' ' .. (f['d'] or '0') ..
            ' ' .. (f['t'] or '0') .. ' ' .. #item .. ' ' .. #producer
  items[n] = item
  producers[n] = producer
end
return {table.concat(meta, ' '), table.concat(items), table.concat(producers)}
