-- Cancel a submitted task that no worker has started: from now on, a worker
-- that reaches it drops it (claim.lua), until it leaves the queue.
-- KEYS[1] - the executor's claims hash (task id -> 'q', 'cancel', 'run:...' or 'lost:...')
-- ARGV[1] - task id
-- return 1 if cancelled (it will never run), 0 if a worker has started it or
-- given up on it, -1 if it is not marked: finished, or not submitted yet
local claims = KEYS[1]
local task_id = ARGV[1]
local state = redis.call('HGET', claims, task_id)
if not state then return -1 end
if state == 'q' or state == 'cancel' then
  redis.call('HSET', claims, task_id, 'cancel')
  return 1
end
return 0
