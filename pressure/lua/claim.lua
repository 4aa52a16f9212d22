-- A worker takes a task it received, unless the task's future was cancelled.
-- KEYS[1] - the executor's claims hash (task id -> 'cancel' or 'run:<worker>')
-- ARGV[1] - task id
-- ARGV[2] - worker id
-- return 1 if the worker may run the task, 0 if it was cancelled (the mark is
-- removed: the task is gone)
if redis.call('HGET', KEYS[1], ARGV[1]) == 'cancel' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], 'run:' .. ARGV[2])
return 1
