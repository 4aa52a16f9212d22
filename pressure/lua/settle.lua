-- A worker is done with deliveries of tasks (their replies, if any, were put
-- just before, in the same transaction): acknowledge each (its entry leaves the
-- worker's in-flight list, as ack.lua does) and, in the same step, remove the
-- task's mark (and its ':started' count) if it is this delivery's decision
-- (claim.lua) or 'cancel', so the decision lasts exactly as long as the task
-- is in the queue. A delivery
-- whose mark is another's (a second copy of a task) leaves the mark alone. A
-- task with no mark has finished: a ':started' count its worker posted after
-- that (it started a delivery it no longer held, which another worker ran and
-- settled first) goes too.
-- KEYS[1] - the executor's claims hash
-- KEYS[2] - the worker's in-flight list of the task queue (:pressure:inflight:<consumer>)
-- KEYS[3] - the task queue's :stats:produced_messages
-- KEYS[4] - the task queue's :pressure:tasks_done (each delivery acknowledged counts its task
--           done, as ack.lua does: lib.lua tasks_ended)
-- KEYS[5] - the task queue's :pressure:all_tasks_done (stream that wakes join())
-- ARGV[1] - the worker's consumer id (of the task queue)
-- ARGV[2..] - per delivery, two arguments: its delivery number and its task id
-- return how many deliveries were acknowledged (one already requeued is not)
local claims, inflight = KEYS[1], KEYS[2]
local produced_messages, tasks_done, all_tasks_done = KEYS[3], KEYS[4], KEYS[5]
local consumer_id = ARGV[1]
local settling = {}
for i = 2, #ARGV, 2 do
  local delivery, task_id = ARGV[i], ARGV[i + 1]
  settling[delivery .. ':'] = true
  local state = redis.call('HGET', claims, task_id)
  local decided_by = state and string.match(state, '^%a+:%d+:(.*:%d+)$')
  if not state or state == 'cancel' or decided_by == consumer_id .. ':' .. delivery then
    redis.call('HDEL', claims, task_id, task_id .. ':started')
  end
end
local acked = 0
for _, entry in ipairs(redis.call('LRANGE', inflight, '0', '-1')) do
  local prefix = string.match(entry, '^[^:]*:')
  if prefix and settling[prefix] then
    redis.call('LREM', inflight, '1', entry)
    settling[prefix] = nil
    acked = acked + 1
  end
end
if acked > 0 then tasks_ended(produced_messages, tasks_done, all_tasks_done, acked) end
return acked
