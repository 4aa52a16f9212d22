-- Get one item (protocol Get), or register as the consumer waiting for one.
-- A blocking caller sends this script and BRPOP <inbox> <signal> in one
-- pipeline: the item comes through its private inbox, either at once (put
-- there by this script) or later, from put.lua while it waits holding the
-- consumer role; any other outcome leaves a wake-up in <signal> so that the
-- BRPOP answers at once.
-- KEYS[1]  - the queue list
-- KEYS[2]  - :bound
-- KEYS[3]  - :consumer_free
-- KEYS[4]  - :consumer
-- KEYS[5]  - :closed
-- KEYS[6]  - :not_full
-- KEYS[7]  - :stats:consumed_messages
-- KEYS[8]  - :stats:consumed_bytes
-- KEYS[9]  - :pressure:waiter
-- KEYS[10] - this client's inbox (:pressure:inbox:<id>)
-- KEYS[11] - this client's signal list (:pressure:signal:<id>)
-- ARGV[1] - client identifier
-- ARGV[2] - 'nowait': return the payload itself, never wait
--           'block': deliver to the inbox, or register as the waiter
--           'cancel': stop waiting (give the role back if still registered)
-- ARGV[3] - '1' if the caller asked to block with a negative timeout
-- return
--   'nowait': the payload, or -2 (role held by another client while items
--             wait), -3 (closed and empty), -4 (no queue), -5 (empty)
--   'block':  1 (an item is in the inbox), -6 (registered as the waiter),
--             -2 (role held by another client), -3, -4, -7 (negative timeout)
--   'cancel': 1 if an item was delivered to the inbox meanwhile, else -5
local me = ARGV[1]
local mode = ARGV[2]
local registered = redis.call('GET', KEYS[9]) == me

local function stop_waiting()
  if registered then
    redis.call('DEL', KEYS[9])
    if redis.call('LLEN', KEYS[3]) == 0 then redis.call('LPUSH', KEYS[3], 1) end
    registered = false
  end
end

local function wake(code)
  stop_waiting()
  redis.call('DEL', KEYS[11])
  redis.call('LPUSH', KEYS[11], code)
  return code
end

if mode == 'cancel' then
  stop_waiting()
  if redis.call('LLEN', KEYS[10]) > 0 then return 1 end
  return -5
end
-- an item delivered to us earlier (e.g. a reply lost on a dropped connection) comes first
if redis.call('LLEN', KEYS[10]) > 0 then
  if mode == 'nowait' then return redis.call('RPOP', KEYS[10]) end
  return 1
end
local raw = redis.call('GET', KEYS[2])
if not raw then
  if mode == 'nowait' then return -4 end
  return wake(-4)
end
local bound = tonumber(raw)
if not bound or bound < 0 or bound % 1 ~= 0 then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. KEYS[2])
end
local len = redis.call('LLEN', KEYS[1])
if len == 0 and redis.call('EXISTS', KEYS[5]) == 1 then
  if mode == 'nowait' then return -3 end
  return wake(-3)
end
if ARGV[3] == '1' then return wake(-7) end
if not registered and redis.call('LLEN', KEYS[3]) == 0 then
  if mode == 'nowait' then
    if len == 0 then return -5 end
    return -2
  end
  return wake(-2)
end
if redis.call('GET', KEYS[4]) ~= me then redis.call('SET', KEYS[4], me) end
local permits = redis.call('LLEN', KEYS[6])
if len > 0 then
  local item = redis.call('RPOP', KEYS[1])
  len = len - 1
  redis.call('INCR', KEYS[7])
  redis.call('INCRBY', KEYS[8], #item)
  if (bound == 0 or len < bound) and permits ~= 1 then
    if permits > 1 then redis.call('LTRIM', KEYS[6], 0, 0) else redis.call('LPUSH', KEYS[6], 1) end
  end
  stop_waiting()
  if mode == 'nowait' then return item end
  redis.call('LPUSH', KEYS[10], item)
  return 1
end
if permits ~= 1 then
  if permits > 1 then redis.call('LTRIM', KEYS[6], 0, 0) else redis.call('LPUSH', KEYS[6], 1) end
end
if mode == 'nowait' then return -5 end
-- empty and open: wait holding the consumer role, as the protocol's Get does
if not registered then
  redis.call('RPOP', KEYS[3])
  redis.call('SET', KEYS[9], me)
end
redis.call('DEL', KEYS[11])
return -6
