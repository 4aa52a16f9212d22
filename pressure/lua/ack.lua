-- Acknowledge a delivery: remove its entry from the consumer's in-flight
-- list. Idempotent: acknowledging twice, or an entry already requeued, is 0.
-- With task_done, also mark one task done (queue.task_done), atomically.
-- KEYS[1] - :bound
-- KEYS[2] - :stats:produced_messages
-- KEYS[3] - :pressure:tasks_done
-- KEYS[4] - :pressure:all_tasks_done (stream that wakes join())
-- KEYS[5] - :pressure:meta (an acknowledged item's ttl, ttr and utube key go with it, its
--           field 'd<delivery number>'; lib.lua state_of). For an item of a utube key, these are used too, named from it (lib.lua
--           sibling_key): :pressure:utube (its key's next item comes in: lib.lua utube_done),
--           the items <base> (KEYS[5] without ':pressure:meta'), and :pressure:waiter,
--           :pressure:lease and :pressure:inbox:<waiter> (the waiter is woken)
-- KEYS[6] - the consumer's in-flight list (:pressure:inflight:<id>)
-- ARGV[1] - delivery number ('s' removes one wake-up entry; '-' none; '*'
--           acknowledges everything the consumer holds, in one step: never with task_done)
-- ARGV[2] - '1' to also mark a task done; '2' the same, only if the delivery was still in
--           flight (a task_done sent again after its reply was lost: if the entry is gone,
--           the lost call ran and counted the task, or the item was requeued and its
--           redelivery will count it)
-- return {acked (1/0; with '*', how many), unfinished left or -1 (task_done
-- called too many times) or -4 (no queue) or 0 without task_done}
local bound_key, produced_messages, tasks_done = KEYS[1], KEYS[2], KEYS[3]
local all_tasks_done, meta, inflight = KEYS[4], KEYS[5], KEYS[6]
local delivery, task_done = ARGV[1], ARGV[2]

if delivery == '*' then
  local held = redis.call('LLEN', inflight)
  if held > 0 and redis.call('EXISTS', meta) == 1 then
    for _, entry in ipairs(redis.call('LRANGE', inflight, '0', '-1')) do entry_done(meta, entry, items_push_all) end
  end
  redis.call('DEL', inflight)
  return {held, 0}
end
local acked = 0
local prefix = delivery .. ':'
if delivery ~= '-' then  -- '-' (a default-mode task_done) names no delivery
  local entry = find_entry(inflight, prefix)
  if entry then
    redis.call('LREM', inflight, '-1', entry)  -- from the tail, where find_entry found it
    if redis.call('EXISTS', meta) == 1 then entry_done(meta, entry, items_push_all) end
    acked = 1
  end
end
if task_done ~= '1' and (task_done ~= '2' or acked == 0) then return {acked, 0} end
-- the three string keys in one MGET (lib.lua read: a false value is read again)
local values = redis.call('MGET', bound_key, produced_messages, tasks_done)
if not values[1] and redis.call('EXISTS', bound_key) == 0 then return {acked, -4} end
local produced = counter_of(produced_messages, values[2])
local done = counter_of(tasks_done, values[3])
if done >= produced then return {acked, -1} end
done = redis.call('INCR', tasks_done)
if done >= produced then
  redis.call('XADD', all_tasks_done, 'MAXLEN', '1', '*', 'done', done)
end
return {acked, produced - done}
