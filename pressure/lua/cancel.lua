-- Cancel a submitted task that no worker has started or claimed to start next:
-- from now on, a worker that reaches it drops it (claim.lua), until it leaves
-- the queue. A task a worker claimed to start next ('pre') cancels again once
-- that worker no longer holds it (it gave it back to the queue, or died),
-- unless the worker started it ('<task id>:started').
-- KEYS[1] - the executor's claims hash (task id -> 'q', 'cancel', 'pre:...', 'run:...' or 'lost:...')
-- ARGV[1] - task id
-- ARGV[2] - the task queue's in-flight list prefix (:pressure:inflight:)
-- return 1 if cancelled (it will never run), 0 if a worker has started it,
-- holds it to start next, or gave up on it, -1 if it is not marked: finished,
-- or not submitted yet
local claims = KEYS[1]
local task_id, inflight_prefix = ARGV[1], ARGV[2]
local state = redis.call('HGET', claims, task_id)
if not state then return -1 end
local cancellable = state == 'q' or state == 'cancel'
local consumer, seq = string.match(state, '^pre:%d+:(.*):(%d+)$')
if consumer and not redis.call('HGET', claims, task_id .. ':started') then
  cancellable = true
  local prefix = seq .. ':'
  for _, entry in ipairs(redis.call('LRANGE', inflight_prefix .. consumer, '0', '-1')) do
    if string.sub(entry, 1, #prefix) == prefix then cancellable = false break end
  end
end
if not cancellable then return 0 end
redis.call('HSET', claims, task_id, 'cancel')
return 1
