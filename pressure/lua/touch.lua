-- Extend a delivery's visibility timeout: re-stamp its entry in the consumer's
-- in-flight list with the server's time, so the sweep counts the timeout from
-- now (a long task that is still running is never redelivered).
-- KEYS[1] - the consumer's in-flight list (:pressure:inflight:<id>); its held list
--           (:pressure:held:<id>, named from it) too: a reliable consumer's native delivery
--           waits there under the header 'n:<seq>:<ms>:' (get.lua flag 'N')
-- ARGV[1] - delivery number, or '*' for every entry the consumer holds
-- return 1 if touched, 0 if the entry is gone (acknowledged or requeued);
--        with '*', how many entries were touched
local inflight = KEYS[1]
local delivery = ARGV[1]
local now = redis.call('TIME')
now = now[1] * 1000 + math.floor(now[2] / 1000)
local held = held_of(inflight)
-- the native delivery in the held list, re-stamped if it is `delivery` ('*': any): 1, else 0
local function touch_native()
  local first = string.match(redis.call('LINDEX', held, '0') or '', '^n:([^:]*):')
  if not first or (delivery ~= '*' and first ~= delivery) then return 0 end
  redis.call('LSET', held, '0', 'n:' .. first .. ':' .. now .. ':')
  return 1
end
if delivery == '*' then
  local entries = redis.call('LRANGE', inflight, '0', '-1')
  local touched = 0
  for i, entry in ipairs(entries) do
    local seq, deliveries, rest = string.match(entry, '^([^:]*):([^:]*):[^:]*:(.*)$')
    if seq and seq ~= 's' then
      entries[i] = seq .. ':' .. deliveries .. ':' .. now .. ':' .. rest
      touched = touched + 1
    end
  end
  rewrite_list(inflight, entries)
  return touched + touch_native()
end
local prefix = delivery .. ':'
local entry, index = find_entry(inflight, prefix)
if not entry then return touch_native() end
local deliveries, rest = string.match(entry, '^[^:]*:([^:]*):[^:]*:(.*)$')
redis.call('LSET', inflight, index, delivery .. ':' .. deliveries .. ':' .. now .. ':' .. rest)
return 1
