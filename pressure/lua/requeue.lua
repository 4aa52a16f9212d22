-- Return delivered items to the head of the queue, oldest first, or to the
-- dead-letter list once delivered max_deliveries times. Three uses:
--   'release': one delivery its consumer gives back (ARGV[6] = its number)
--   'recover': everything a dead consumer holds - its held batch, its inbox, its
--              in-flight list, and the consumer role if it was the waiter - only
--              if its record is still ARGV[6] (the same incarnation)
--   'sweep':   at most once per ARGV[7] ms across all clients: entries older
--              than their consumer's visibility timeout or lease; and from a
--              waiter whose lease expired, the role and its inbox (what it
--              never received) - its in-flight list follows its visibility
--              timeout, since the waiter may be alive, only slow
-- Whatever a consumer's lists hold was never acknowledged, so it is requeued, in
-- both modes: a reliable consumer's in-flight entries were not acknowledged, and a
-- default-mode consumer (record ending in '|d') drops its in-flight entries and held
-- batch (get.lua 'batch') as soon as its get has the items in hand, so what is left
-- there was never returned by its get. A requeued item leaves :stats:consumed_* (it
-- is back in the list) and its delivery count is kept in :pressure:redeliveries under
-- sha1(payload). An entry that no consumed message accounts for is dropped, never
-- requeued. A waiter is woken when items come back (lib.lua nudge_waiter).
-- KEYS[1]  - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2]  - :stats:consumed_messages
-- KEYS[3]  - :stats:consumed_bytes
-- KEYS[4]  - :consumer_free
-- KEYS[5]  - :pressure:waiter
-- KEYS[6]  - :pressure:lease
-- KEYS[7]  - :pressure:consumers (hash: identifier -> 'host|pid|start|ms|mode')
-- KEYS[8]  - :pressure:redeliveries
-- KEYS[9]  - :pressure:dead (dead-letter list of entries)
-- KEYS[10] - :pressure:sweep (rate limit of 'sweep')
-- KEYS[11] - :bound
-- KEYS[12] - :not_full
-- ARGV[1] - 'release', 'recover' or 'sweep'
-- ARGV[2] - inbox key prefix (:pressure:inbox:)
-- ARGV[3] - in-flight key prefix (:pressure:inflight:)
-- ARGV[4] - max deliveries before dead-lettering (0 = never)
-- ARGV[5] - consumer identifier ('release', 'recover')
-- ARGV[6] - delivery number ('release') or the consumer's record ('recover')
-- ARGV[7] - sweep interval in ms ('sweep'; else '')
-- ARGV[8] - held-batch key prefix (:pressure:held:)
-- return {items requeued, items dead-lettered}, or {-1, 0} if nothing was
-- done ('recover' of a changed record, 'sweep' within the interval); 'sweep'
-- adds the consumers hash as a flat list so the caller can check pids
local max_deliveries = tonumber(ARGV[4])
local requeued, dead = 0, 0

local function requeue(entry)
  local seq, deliveries, ms, payload = string.match(entry, '^([^:]*):([^:]*):([^:]*):(.*)$')
  if not seq or seq == 's' then return end
  deliveries = tonumber(deliveries) or 1
  if counter(KEYS[2]) < 1 then
    -- every delivery of this queue counts in :stats:consumed_messages until requeued: with
    -- none counted, the entry belongs to an earlier queue of this name (deleted and created
    -- again by plain spec clients, which cannot know our keys): it must not enter this one
    return
  end
  if max_deliveries > 0 and deliveries >= max_deliveries then
    redis.call('LPUSH', KEYS[9], entry)
    dead = dead + 1
    return
  end
  items_return(KEYS[1], payload)
  redis.call('DECR', KEYS[2])
  redis.call('DECRBY', KEYS[3], items_size(payload))
  local digest = redis.sha1hex(payload)
  local known = tonumber(redis.call('HGET', KEYS[8], digest) or '0')
  if deliveries > known then redis.call('HSET', KEYS[8], digest, deliveries) end
  requeued = requeued + 1
end

-- entries come newest first; pushing each to the head leaves the oldest next out
local function requeue_all(key)
  for _, entry in ipairs(redis.call('LRANGE', key, 0, -1)) do requeue(entry) end
  redis.call('DEL', key)
end

-- The items of a held batch (get.lua 'batch') as delivery entries, newest first (the
-- order of an in-flight list); none if `held` holds no batch.
local function held_entries(held)
  local first, ms, counts = string.match(redis.call('LINDEX', held, 0) or '', '^h:([^:]*):([^:]*):(.*)$')
  if not first then return {} end
  local deliveries = {}
  for count in string.gmatch(counts, '[^,]+') do deliveries[#deliveries + 1] = count end
  local items = redis.call('LRANGE', held, 1, -1)  -- newest first
  local entries = {}
  for j, item in ipairs(items) do
    local i = #items - j + 1
    entries[j] = (first + i - 1) .. ':' .. (deliveries[i] or 1) .. ':' .. ms .. ':' .. item
  end
  return entries
end

local function requeue_held(held)
  for _, entry in ipairs(held_entries(held)) do requeue(entry) end
  redis.call('DEL', held)
end

-- give back the consumer role if `id` is the registered waiter
local function take_role(id)
  if redis.call('GET', KEYS[5]) == id then
    redis.call('DEL', KEYS[5])
    if redis.call('LLEN', KEYS[4]) == 0 then redis.call('LPUSH', KEYS[4], 1) end
  end
  if redis.call('GET', KEYS[6]) == id then redis.call('DEL', KEYS[6]) end
end

-- the newest deliveries first, so the oldest ends up next out: a held batch is newer than
-- the in-flight entries of the same get_many, an inbox entry newer than those received
local function recover(id)
  take_role(id)
  requeue_held(ARGV[8] .. id)
  requeue_all(ARGV[2] .. id)
  requeue_all(ARGV[3] .. id)
  redis.call('HDEL', KEYS[7], id)
end

local function upkeep()
  if requeued > 0 then nudge_waiter(redis.call('GET', KEYS[5]), redis.call('GET', KEYS[6]), ARGV[2]) end
  local bound = bound_of(redis.call('GET', KEYS[11]))
  if not bound then return end  -- no queue, or a bad bound: leave :not_full to the client's error
  keep_permit(KEYS[12], items_len(KEYS[1]), bound, redis.call('LLEN', KEYS[12]))
end

local mode = ARGV[1]
if mode == 'release' then
  local key = ARGV[3] .. ARGV[5]
  local prefix = ARGV[6] .. ':'
  -- an item of a held batch: the batch becomes in-flight entries first (as get.lua
  -- 'many' would have left them), so it is released and acknowledged as they are
  local held = ARGV[8] .. ARGV[5]
  local entries = held_entries(held)
  if #entries > 0 then
    for j = #entries, 1, -1 do redis.call('LPUSH', key, entries[j]) end
    redis.call('DEL', held)
  end
  for _, entry in ipairs(redis.call('LRANGE', key, 0, -1)) do
    if string.sub(entry, 1, #prefix) == prefix then
      redis.call('LREM', key, 1, entry)
      requeue(entry)
      break
    end
  end
elseif mode == 'recover' then
  if redis.call('HGET', KEYS[7], ARGV[5]) ~= ARGV[6] then return {-1, 0} end
  recover(ARGV[5])
else
  if redis.call('EXISTS', KEYS[11]) == 0 then return {-1, 0} end  -- no queue (deleted)
  if not redis.call('SET', KEYS[10], 1, 'NX', 'PX', ARGV[7]) then return {-1, 0} end
  local waiter = redis.call('GET', KEYS[5])
  if waiter and redis.call('GET', KEYS[6]) ~= waiter then
    take_role(waiter)
    requeue_all(ARGV[2] .. waiter)
  end
  local now = redis.call('TIME')
  now = now[1] * 1000 + math.floor(now[2] / 1000)
  local consumers = redis.call('HGETALL', KEYS[7])
  for i = 1, #consumers, 2 do
    local id = consumers[i]
    local visibility = tonumber(string.match(consumers[i + 1], '([^|]*)|[^|]*$')) or 0
    local empty = true
    local held = ARGV[8] .. id
    local ms = tonumber(string.match(redis.call('LINDEX', held, 0) or '', '^h:[^:]*:([^:]*):'))
    if ms and visibility > 0 and ms + visibility <= now then
      requeue_held(held)
    elseif ms then
      empty = false
    end
    for _, key in ipairs({ARGV[2] .. id, ARGV[3] .. id}) do
      for _, entry in ipairs(redis.call('LRANGE', key, 0, -1)) do
        local ms = tonumber(string.match(entry, '^[^:]*:[^:]*:([^:]*):'))
        if visibility > 0 and ms and ms + visibility <= now then
          redis.call('LREM', key, 1, entry)
          requeue(entry)
        elseif ms then
          empty = false
        end
      end
    end
    if empty and redis.call('GET', KEYS[5]) ~= id then
      -- only wake-up entries are left: those BLMOVE moved in flight are garbage; one still
      -- in the inbox is a wake-up its consumer may be about to read, so the record stays
      -- until the inbox is gone too (a Delete finds lists only through the records)
      redis.call('LREM', ARGV[3] .. id, 0, 's:')
      if redis.call('EXISTS', ARGV[2] .. id, ARGV[3] .. id) == 0 then redis.call('HDEL', KEYS[7], id) end
    end
  end
  upkeep()
  local result = {requeued, dead}
  for _, v in ipairs(redis.call('HGETALL', KEYS[7])) do table.insert(result, v) end
  return result
end
upkeep()
return {requeued, dead}
