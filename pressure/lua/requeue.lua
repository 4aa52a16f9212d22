-- Return delivered items to the head of the queue, oldest first, or to the
-- dead-letter list once delivered max_deliveries times. Three uses:
--   'release': one delivery its consumer gives back (ARGV[6] = its number)
--   'recover': everything a dead consumer holds - its held batch, its inbox, its
--              in-flight list, and the consumer role if it was the waiter - only
--              if its record is still ARGV[6] (the same incarnation); its record
--              goes. Also how a consumer leaves cleanly (its handle disconnected,
--              collected, or its process exiting): then ARGV[11..] name what its
--              default-mode gets returned, dropped instead of requeued
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
-- is back in the list) and keeps its own state, its delivery count with its ttl, ttr and
-- utube key (lib.lua state_of): as a queued copy's (lib.lua copies_push), or a delayed one's.
-- An entry that no consumed message accounts for is dropped, never requeued. A waiter is
-- woken when items come back (lib.lua nudge_waiter).
-- KEYS[1]  - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2]  - :stats:consumed_messages
-- KEYS[3]  - :stats:consumed_bytes
-- KEYS[4]  - :consumer_free
-- KEYS[5]  - :pressure:waiter
-- KEYS[6]  - :pressure:lease
-- KEYS[7]  - :pressure:consumers (hash: identifier -> 'host|pid|start|ms|mode')
-- KEYS[8]  - :pressure:redeliveries (the states of queued copies, with the lists named after
--            it; lib.lua copies_push)
-- KEYS[9]  - :pressure:dead (dead-letter list of entries)
-- KEYS[10] - :pressure:sweep (rate limit of 'sweep')
-- KEYS[11] - :bound
-- KEYS[12] - :not_full
-- KEYS[13] - :pressure:delivery_seq (numbers the members of :pressure:delayed)
-- KEYS[14] - :pressure:delayed (sorted set of delayed items by due time; see lib.lua)
-- KEYS[15] - :pressure:meta (the states of taken and delayed copies; lib.lua state_of; 'sweep':
--            an item's ttr replaces its consumer's visibility timeout)
-- KEYS[16] - :pressure:counts (lifecycle counters: 'release', 'bury', 'returned' (items
--            requeued, each of which left :stats:consumed_messages) and 'dead' (delivered
--            items dead-lettered, buried ones included))
-- KEYS[17] - :pressure:utube (a dead-lettered item of a utube key lets its key's next item
--            in; lib.lua utube_done)
-- KEYS[18] - :stats:produced_messages
-- KEYS[19] - :pressure:tasks_done (a dead-lettered item counts as done: lib.lua tasks_ended;
--            one requeued does not)
-- KEYS[20] - :pressure:all_tasks_done (stream that wakes join())
-- ARGV[1] - 'release', 'recover' or 'sweep'
-- ARGV[2] - inbox key prefix (:pressure:inbox:)
-- ARGV[3] - in-flight key prefix (:pressure:inflight:)
-- ARGV[4] - max deliveries before dead-lettering (0 = never)
-- ARGV[5] - consumer identifier ('release', 'recover')
-- ARGV[6] - delivery number ('release') or the consumer's record ('recover')
-- ARGV[7] - sweep interval in ms ('sweep'; else '')
-- ARGV[8] - held-batch key prefix (:pressure:held:)
-- ARGV[9] - ('release') a delay in ms ('' or '0': none): the item goes to KEYS[14], due
--           then, instead of the head of the queue (it keeps its delivery count)
-- ARGV[10] - ('release') '' or 'buried': straight to the dead letters, the entry marked
--            'buried.<seq>' (Delivery.bury)
-- ARGV[11..] - ('recover') delivery numbers the consumer's default-mode gets returned
--              ('h<first seq>' for a held batch): in its hands, so dropped, never requeued;
--              of a reliable consumer (record not ending in '|d'), those it acknowledged
--              whose acknowledgement may not have run yet (posted on another connection):
--              acknowledged here, as ack.lua does (its task counted done; that ack.lua then
--              finds nothing and counts nothing)
-- return {items requeued, items dead-lettered}, or {-1, 0} if nothing was
-- done ('recover' of a changed record, 'sweep' within the interval); 'sweep'
-- adds the consumers hash as a flat list so the caller can check pids
local items_key, consumed_messages, consumed_bytes = KEYS[1], KEYS[2], KEYS[3]
local consumer_free, waiter_key, lease_key = KEYS[4], KEYS[5], KEYS[6]
local consumers, redeliveries, dead_letters = KEYS[7], KEYS[8], KEYS[9]
local sweep_key, bound_key, not_full = KEYS[10], KEYS[11], KEYS[12]
local mode, inbox_prefix, inflight_prefix = ARGV[1], ARGV[2], ARGV[3]
local max_deliveries, consumer_id, delivery_or_record = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local sweep_ms, held_prefix = ARGV[7], ARGV[8]
local delivery_seq, delayed = KEYS[13], KEYS[14]
local delay = tonumber(ARGV[9]) or 0
local meta, counts_key, reason = KEYS[15], KEYS[16], ARGV[10]
local utube, produced_messages, tasks_done = KEYS[17], KEYS[18], KEYS[19]
local all_tasks_done = KEYS[20]

local requeued, dead = 0, 0
local has_meta = nil  -- whether :pressure:meta exists, asked once

-- The ttl, ttr and key of the copy delivered as `seq` ('|<expires>|<ttr>|<d>|<key>'), taken out
-- of :pressure:meta, or nil.
local function taken_state(seq)
  if has_meta == nil then has_meta = redis.call('EXISTS', meta) == 1 end
  if not has_meta then return nil end
  local raw = redis.call('HGET', meta, 'd' .. seq)
  if raw then redis.call('HDEL', meta, 'd' .. seq) end
  return raw
end

local function requeue(entry)
  local seq, deliveries, ms, payload = string.match(entry, '^([^:]*):([^:]*):([^:]*):(.*)$')
  if not seq or seq == 's' then return end
  deliveries = tonumber(deliveries) or 1
  if counter(consumed_messages) < 1 then
    -- every delivery of this queue counts in :stats:consumed_messages until requeued: with
    -- none counted, the entry belongs to an earlier queue of this name (deleted and created
    -- again by plain spec clients, which cannot know our keys): it must not enter this one
    return
  end
  local taken = taken_state(seq)
  if reason == 'buried' or (max_deliveries > 0 and deliveries >= max_deliveries) then
    -- its state goes (a kicked item starts afresh), and its utube key lets the next one in
    if reason == 'buried' then entry = 'buried.' .. entry end
    redis.call('LPUSH', dead_letters, entry)
    if taken then utube_done(utube, state_of(taken), items_key, items_push_all, items_len) end
    dead = dead + 1
    return
  end
  local state = deliveries .. (taken or NO_META)
  if delay > 0 then
    local member = delayed_member(delivery_seq, payload)
    redis.call('ZADD', delayed, now_ms() + delay, member)
    redis.call('HSET', meta, 'z' .. string.sub(member, 1, 16), state)
    has_meta = true
  else
    items_return(items_key, payload)
    copies_push(redeliveries, payload, state, true)
  end
  redis.call('DECR', consumed_messages)
  redis.call('DECRBY', consumed_bytes, items_size(payload))
  requeued = requeued + 1
end

-- entries come newest first; pushing each to the head leaves the oldest next out
-- what a leaving consumer's gets returned ('recover', ARGV[11..]): dropped, not requeued
local returned = {}
for i = 11, #ARGV do returned[ARGV[i]] = true end

local acknowledging = mode == 'recover' and string.sub(delivery_or_record, -2) ~= '|d'
local acked = 0
local function requeue_all(key)
  for _, entry in ipairs(redis.call('LRANGE', key, '0', '-1')) do
    if not returned[string.match(entry, '^([^:]*):') or ''] then
      requeue(entry)
    elseif acknowledging then
      if redis.call('EXISTS', meta) == 1 then entry_done(meta, entry, items_push_all, items_len) end
      acked = acked + 1
    end
  end
  redis.call('DEL', key)
end

local function requeue_held(held)
  local first = string.match(redis.call('LINDEX', held, '0') or '', '^[hn]:([^:]*):')
  if first and acknowledging and returned[first] then
    -- a reliable consumer's native delivery (get.lua flag 'N') whose acknowledgement it posted
    count_native(held, consumed_bytes)
    acked = acked + 1
  elseif first and returned['h' .. first] then
    count_native(held, consumed_bytes)  -- returned by its get: in its consumer's hands
  else
    for _, entry in ipairs(held_entries(held, consumed_bytes)) do requeue(entry) end
  end
  redis.call('DEL', held)
end

-- give back the consumer role if `id` is the registered waiter
local function take_role(id)
  if redis.call('GET', waiter_key) == id then
    redis.call('DEL', waiter_key)
    if redis.call('LLEN', consumer_free) == 0 then redis.call('LPUSH', consumer_free, '1') end
  end
  if redis.call('GET', lease_key) == id then redis.call('DEL', lease_key) end
end

-- the newest deliveries first, so the oldest ends up next out: a held batch is newer than
-- the in-flight entries of the same get_many, an inbox entry newer than those received
local function recover(id)
  take_role(id)
  requeue_held(held_prefix .. id)
  requeue_all(inbox_prefix .. id)
  requeue_all(inflight_prefix .. id)
  redis.call('HDEL', consumers, id)
end

local function upkeep()
  -- items given back leave :stats:consumed_messages: counted here, so takes can be told
  if requeued > 0 then redis.call('HINCRBY', counts_key, 'returned', requeued) end
  if dead > 0 then redis.call('HINCRBY', counts_key, 'dead', dead) end
  if dead + acked > 0 then tasks_ended(produced_messages, tasks_done, all_tasks_done, dead + acked) end
  if requeued > 0 and delay == 0 then
    nudge_waiter(redis.call('GET', waiter_key), redis.call('GET', lease_key), inbox_prefix)
  end
  local bound = bound_of(redis.call('GET', bound_key))
  if not bound then return end  -- no queue, or a bad bound: leave :not_full to the client's error
  keep_permit(not_full, items_len(items_key) + redis.call('ZCARD', delayed), bound,
              redis.call('LLEN', not_full))
end

if mode == 'release' then
  local key = inflight_prefix .. consumer_id
  local prefix = delivery_or_record .. ':'
  -- an item of a held batch: the batch becomes in-flight entries first (as get.lua
  -- 'many' would have left them), so it is released and acknowledged as they are
  local held = held_prefix .. consumer_id
  local entries = held_entries(held, consumed_bytes)
  if #entries > 0 then
    for j = #entries, 1, -1 do redis.call('LPUSH', key, entries[j]) end
    redis.call('DEL', held)
  end
  local entry = find_entry(key, prefix)
  if entry then
    redis.call('LREM', key, '-1', entry)  -- from the tail, where find_entry found it
    requeue(entry)
    if reason == 'buried' then
      redis.call('HINCRBY', counts_key, 'bury', '1')
    else
      redis.call('HINCRBY', counts_key, 'release', '1')
    end
  end
elseif mode == 'recover' then
  if redis.call('HGET', consumers, consumer_id) ~= delivery_or_record then return {-1, 0} end
  recover(consumer_id)
else
  if redis.call('EXISTS', bound_key) == 0 then return {-1, 0} end  -- no queue (deleted)
  if not redis.call('SET', sweep_key, '1', 'NX', 'PX', sweep_ms) then return {-1, 0} end
  local waiter = redis.call('GET', waiter_key)
  if waiter and redis.call('GET', lease_key) ~= waiter then
    take_role(waiter)
    requeue_all(inbox_prefix .. waiter)
  end
  local now = redis.call('TIME')
  now = now[1] * 1000 + math.floor(now[2] / 1000)
  local stated = redis.call('EXISTS', meta) == 1
  local records = redis.call('HGETALL', consumers)
  for i = 1, #records, 2 do
    local id = records[i]
    local visibility = tonumber(string.match(records[i + 1], '([^|]*)|[^|]*$')) or 0
    local empty = true
    local held = held_prefix .. id
    local ms = tonumber(string.match(redis.call('LINDEX', held, '0') or '', '^[hn]:[^:]*:([^:]*):'))
    if ms and visibility > 0 and ms + visibility <= now then
      requeue_held(held)
    elseif ms then
      empty = false
    end
    for _, key in ipairs({inbox_prefix .. id, inflight_prefix .. id}) do
      for _, entry in ipairs(redis.call('LRANGE', key, '0', '-1')) do
        local seq, ms = string.match(entry, '^([^:]*):[^:]*:([^:]*):')
        ms = tonumber(ms)
        local limit = visibility
        if stated and ms then
          local m = state_of(redis.call('HGET', meta, 'd' .. seq))
          if m and m.ttr then limit = m.ttr end
        end
        if limit > 0 and ms and ms + limit <= now then
          redis.call('LREM', key, '1', entry)
          requeue(entry)
        elseif ms then
          empty = false
        end
      end
    end
    if empty and redis.call('GET', waiter_key) ~= id then
      -- only wake-up entries are left: those BLMOVE moved in flight are garbage; one still
      -- in the inbox is a wake-up its consumer may be about to read, so the record stays
      -- until the inbox is gone too (a Delete finds lists only through the records)
      redis.call('LREM', inflight_prefix .. id, '0', 's:')
      if redis.call('EXISTS', inbox_prefix .. id, inflight_prefix .. id) == 0 then
        redis.call('HDEL', consumers, id)
      end
    end
  end
  upkeep()
  local result = {requeued, dead}
  for _, v in ipairs(redis.call('HGETALL', consumers)) do table.insert(result, v) end
  return result
end
upkeep()
return {requeued, dead}
