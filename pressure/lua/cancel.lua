-- Cancel a task that no worker has started: from now on, a worker that
-- receives it drops it (claim.lua).
-- KEYS[1] - the executor's claims hash (task id -> 'cancel' or 'run:<starts>:<worker>')
-- ARGV[1] - task id
-- return 1 if cancelled (it will never run), 0 if a worker has started it
local state = redis.call('HGET', KEYS[1], ARGV[1])
if state then
  if state == 'cancel' then return 1 end
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], 'cancel')
return 1
