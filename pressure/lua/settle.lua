-- A worker is done with deliveries of tasks (their replies, if any, were put
-- just before, in the same pipeline): acknowledge each (its entry leaves the
-- worker's in-flight list, as ack.lua does) and, in the same step, remove the
-- task's mark if it is this delivery's decision (claim.lua) or 'cancel', so
-- the decision lasts exactly as long as the task is in the queue. A delivery
-- whose mark is another's (a second copy of a task) leaves the mark alone.
-- KEYS[1] - the executor's claims hash
-- KEYS[2] - the worker's in-flight list of the task queue (:pressure:inflight:<consumer>)
-- ARGV[1] - the worker's consumer id (of the task queue)
-- ARGV[2..] - per delivery, two arguments: its delivery number and its task id
-- return how many deliveries were acknowledged (one already requeued is not)
local settling = {}
for i = 2, #ARGV, 2 do
  settling[ARGV[i] .. ':'] = true
  local state = redis.call('HGET', KEYS[1], ARGV[i + 1])
  if state == 'cancel' or (state and string.match(state, '^%a+:%d+:(.*:%d+)$') == ARGV[1] .. ':' .. ARGV[i]) then
    redis.call('HDEL', KEYS[1], ARGV[i + 1])
  end
end
local acked = 0
for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local prefix = string.match(entry, '^[^:]*:')
  if prefix and settling[prefix] then
    redis.call('LREM', KEYS[2], 1, entry)
    settling[prefix] = nil
    acked = acked + 1
  end
end
return acked
