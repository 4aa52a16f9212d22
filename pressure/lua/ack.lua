-- Acknowledge a delivery: remove its entry from the consumer's in-flight
-- list. Idempotent: acknowledging twice, or an entry already requeued, is 0.
-- An acknowledged delivery counts its task done, once (lib.lua count_ended): an entry
-- already gone was counted, or given back, by what removed it.
-- KEYS[1] - :bound
-- KEYS[2] - :stats:produced_messages
-- KEYS[3] - :pressure:tasks_done
-- KEYS[4] - :pressure:all_tasks_done (stream that wakes join())
-- KEYS[5] - :pressure:meta (an acknowledged item's ttl, ttr and utube key go with it, its
--           field 'd<delivery number>'; lib.lua state_of). For an item of a utube key, these are used too, named from it (lib.lua
--           sibling_key): :pressure:utube (its key's next item comes in: lib.lua utube_done),
--           the items <base> (KEYS[5] without ':pressure:meta') with its :bound and :not_full
--           (the item let in counts against the bound) and :pressure:delayed (its due items move in
--           first), and :pressure:waiter,
--           :pressure:lease and :pressure:inbox:<waiter> (the waiter is woken)
-- KEYS[6] - the consumer's in-flight list (:pressure:inflight:<id>); its held list
--           (:pressure:held:<id>, named from it: a reliable consumer's native delivery, get.lua
--           flag 'N') and :stats:consumed_bytes (its bytes are counted as it is acknowledged)
--           are used too
-- ARGV[1] - delivery number ('s' removes one wake-up entry; '-' none: a default-mode
--           task_done(); '*' acknowledges everything the consumer holds, in one step)
-- ARGV[2] - with '-': '1' to count one task done (task_done() in the default mode), '0' not.
--           With a delivery number: '1' (task_done() in reliable mode: -4 if the queue is gone),
--           '2' (the same, sent again after a lost reply) or '0' (Delivery.ack()); the task is
--           counted only if the delivery was still in flight, whichever it is
-- ARGV[3..] - (optional, one) the delivery's bytes, counted in :stats:consumed_bytes if it is a native
--           one (get.lua flag 'N'); without it they are read from its held list
-- return {acked (1/0; with '*', how many), unfinished left (0 if nothing was counted) or -1
-- (task_done called too many times: '-' with nothing left to count) or -4 (no queue)}
local bound_key, produced_messages, tasks_done = KEYS[1], KEYS[2], KEYS[3]
local all_tasks_done, meta, inflight = KEYS[4], KEYS[5], KEYS[6]
local delivery, task_done = ARGV[1], ARGV[2]

-- a reliable consumer's native delivery waits in its held list (get.lua flag 'N')
local held_list, consumed_bytes = held_of(inflight)
if delivery == '*' then
  local held = redis.call('LLEN', inflight)
  if held > 0 then
    held = held - #redis.call('LPOS', inflight, 's:', 'COUNT', '0')  -- wake-ups hold nothing
    if redis.call('EXISTS', meta) == 1 then
      for _, entry in ipairs(redis.call('LRANGE', inflight, '0', '-1')) do
        entry_done(meta, entry, items_push_all, items_len)
      end
    end
    redis.call('DEL', inflight)
  end
  if take_native(held_list, '*', consumed_bytes, nil) then held = held + 1 end
  if held > 0 and redis.call('EXISTS', bound_key) == 1 then
    tasks_ended(produced_messages, tasks_done, all_tasks_done, held)
  end
  return {held, 0}
end
local acked = 0
local prefix = delivery .. ':'
if delivery ~= '-' then  -- '-' (a default-mode task_done) names no delivery
  local entry = find_entry(inflight, prefix)
  if entry then
    redis.call('LREM', inflight, '-1', entry)  -- from the tail, where find_entry found it
    if redis.call('EXISTS', meta) == 1 then entry_done(meta, entry, items_push_all, items_len) end
    acked = 1
  elseif delivery ~= 's' and take_native(held_list, delivery, consumed_bytes, ARGV[3]) then
    acked = 1  -- (no state: a native delivery has none)
  end
end
if not ((acked == 1 and delivery ~= 's') or (delivery == '-' and task_done == '1')) then
  -- nothing to count: a task_done() in reliable mode still learns that the queue is gone
  if task_done == '1' and redis.call('EXISTS', bound_key) == 0 then return {acked, -4} end
  return {acked, 0}
end
-- the three string keys in one MGET (lib.lua read: a false value is read again)
local values = redis.call('MGET', bound_key, produced_messages, tasks_done)
if not values[1] and redis.call('EXISTS', bound_key) == 0 then
  if task_done == '0' then return {acked, 0} end
  return {acked, -4}
end
local produced = counter_of(produced_messages, values[2])
local done = counter_of(tasks_done, values[3])
-- a delivery acknowledged is never refused: its count stops at produced (lib.lua count_ended)
if acked == 0 and done >= produced then return {acked, -1} end
return {acked, count_ended(tasks_done, all_tasks_done, produced, done, 1)}
