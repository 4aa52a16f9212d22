-- Cancel a submitted task that no worker has started: from now on, a worker
-- that reaches it drops it (claim.lua), until it leaves the queue.
-- KEYS[1] - the executor's claims hash (task id -> 'q', 'cancel', 'run:...' or 'lost:...')
-- ARGV[1] - task id
-- return 1 if cancelled (it will never run), 0 if a worker has started it or
-- given up on it, -1 if it is not marked: finished, or not submitted yet
local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then return -1 end
if state == 'q' or state == 'cancel' then
  redis.call('HSET', KEYS[1], ARGV[1], 'cancel')
  return 1
end
return 0
