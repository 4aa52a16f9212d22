-- Find one item by its task id (the hex SHA1 of its payload, as Delivery.task_id,
-- InFlight.task_id and DeadLetter.task_id give it) in whatever state it is, and show it
-- ('peek', read-only) or remove it ('delete': tarantool's delete, in any state). Looks,
-- in this order, at what consumers hold (in flight or in their inbox), the queue, the
-- delayed items and the dead letters: O(n) in all of them (an operator's tool). Items
-- with identical bytes share an id: the first found is the one (queued: the next out); with
-- ARGV[5] (Delivery.delete), of the taken copies only that delivery. The copy found goes with
-- its own state (lib.lua state_of).
-- A deleted item counts as done (lib.lua tasks_ended), once: ready, delayed or taken (its
-- consumer's ack then finds it gone, and counts nothing); a dead letter was counted when it
-- was dead-lettered (as purge_dead).
-- KEYS[1]  - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2]  - :pressure:delayed
-- KEYS[3]  - :pressure:dead
-- KEYS[4]  - :pressure:consumers (names the consumers' lists: in-flight, inbox, and held, named
--            from ARGV[4]; a native delivery's bytes go to :stats:consumed_bytes as it is deleted)
-- KEYS[5]  - :pressure:meta (the states of taken and delayed copies: removed with them)
-- KEYS[6]  - :pressure:counts (lifecycle counters: 'delete', and 'delete_taken' for those a
--            consumer held)
-- KEYS[7]  - :bound
-- KEYS[8]  - :not_full
-- KEYS[9]  - :stats:produced_messages
-- KEYS[10] - :pressure:tasks_done
-- KEYS[11] - :pressure:all_tasks_done (stream that wakes join())
-- KEYS[12] - :pressure:utube (a deleted item of a utube key lets its key's next one in)
-- KEYS[13] - :pressure:redeliveries (the states of queued copies; lib.lua copies_take)
-- ARGV[1] - 'peek' or 'delete'
-- ARGV[2] - the task id
-- ARGV[3] - inbox key prefix (:pressure:inbox:)
-- ARGV[4] - in-flight key prefix (:pressure:inflight:)
-- ARGV[5] - '' or a delivery number: of the taken copies, only that one is looked at
-- return {state, payload, deliveries (0: not counted in that state), consumer ('' unless
-- taken), delivery number ('' if none)}, state one of 'taken', 'ready', 'delayed', 'buried'; or -1 if no such item
local items_key, delayed, dead_letters = KEYS[1], KEYS[2], KEYS[3]
local consumers, meta, counts_key = KEYS[4], KEYS[5], KEYS[6]
local bound_key, not_full, produced_messages = KEYS[7], KEYS[8], KEYS[9]
local tasks_done, all_tasks_done, utube = KEYS[10], KEYS[11], KEYS[12]
local copies = KEYS[13]
local mode, task_id, inbox_prefix, inflight_prefix = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local delivery = ARGV[5]
local deleting = mode == 'delete'

local function matches(item)
  return redis.sha1hex(items_payload(item)) == task_id
end

-- the item is gone: its state `s` (state_of) with it, and counted (`done`: as done, unless it
-- was counted already; `queued`: it was ready or delayed, and leaves room under the bound)
local function deleted(s, done, queued)
  utube_done(utube, s, items_key, items_push_all, items_len)
  redis.call('HINCRBY', counts_key, 'delete', '1')
  if done then tasks_ended(produced_messages, tasks_done, all_tasks_done, 1) end
  if queued then
    local bound = bound_of(redis.call('GET', bound_key))
    if bound then
      keep_permit(not_full, items_len(items_key) + redis.call('ZCARD', delayed), bound,
                  redis.call('LLEN', not_full))
    end
  end
end

-- the state of a copy kept in :pressure:meta under `field`, taken out of it if deleting
local function kept_state(field)
  local raw = redis.call('HGET', meta, field)
  if raw and deleting then redis.call('HDEL', meta, field) end
  return state_of(raw)
end

-- taken: in a consumer's in-flight list or inbox
for _, id in ipairs(redis.call('HKEYS', consumers)) do
  for _, key in ipairs({inflight_prefix .. id, inbox_prefix .. id}) do
    for _, entry in ipairs(redis.call('LRANGE', key, '0', '-1')) do
      local seq, deliveries, item = string.match(entry, '^([^:]*):([^:]*):[^:]*:(.*)$')
      if seq and seq ~= 's' and (delivery == '' or seq == delivery) and matches(item) then
        if deleting then
          redis.call('LREM', key, '1', entry)
          deleted(kept_state('d' .. seq), true, false)
          redis.call('HINCRBY', counts_key, 'delete_taken', '1')
        end
        return {'taken', items_payload(item), tonumber(deliveries) or 1, id, seq}
      end
    end
  end
end
-- taken: a reliable consumer's native delivery (get.lua flag 'N') in its held list, 'n:<seq>:<ms>:'
-- and its item (a default-mode consumer's held batch is in hand: its get returns it)
local records = redis.call('HGETALL', consumers)
for i = 1, #records, 2 do
  local id = records[i]
  local held = sibling_key(inflight_prefix, 'inflight:', 'held:') .. id
  local seq = string.sub(records[i + 1], -2) == '|r'
    and string.match(redis.call('LINDEX', held, '0') or '', '^n:([^:]*):')
  local item = seq and redis.call('LINDEX', held, '1')
  if item and (delivery == '' or seq == delivery) and matches(item) then
    if deleting then
      count_native(held, items_key .. ':stats:consumed_bytes')
      redis.call('DEL', held)
      deleted(nil, true, false)
      redis.call('HINCRBY', counts_key, 'delete_taken', '1')
    end
    return {'taken', items_payload(item), 1, id, seq}
  end
end
-- ready
for _, item in ipairs(items_all(items_key)) do
  if matches(item) then
    if deleting then
      items_remove(items_key, item)
      deleted(copies_take(copies, redis.sha1hex(item)), true, true)
    end
    return {'ready', items_payload(item), 0, '', ''}
  end
end
-- delayed: 'ready' once due, as qsize() counts it (lib.lua queue_counts), moved in or not
local delayed_items, now = redis.call('ZRANGE', delayed, '0', '-1', 'WITHSCORES'), now_ms()
for i = 1, #delayed_items, 2 do
  local member = delayed_items[i]
  local item = string.sub(member, 17)
  if matches(item) then
    if deleting then
      redis.call('ZREM', delayed, member)
      deleted(kept_state('z' .. string.sub(member, 1, 16)), true, true)
    end
    local state = 'delayed'
    if tonumber(delayed_items[i + 1]) <= now then state = 'ready' end
    return {state, items_payload(item), 0, '', ''}
  end
end
-- buried: the dead letters
for _, entry in ipairs(redis.call('LRANGE', dead_letters, '0', '-1')) do
  local seq, deliveries, item = string.match(entry, '^([^:]*):([^:]*):[^:]*:(.*)$')
  if item and matches(item) then
    if deleting then
      redis.call('LREM', dead_letters, '1', entry)
      deleted(nil, false, false)
    end
    return {'buried', items_payload(item), tonumber(deliveries) or 0, '', seq}
  end
end
return -1
