-- A worker starts a task it received, unless the task's future was cancelled
-- or the task has already been started max_attempts times (each of its
-- workers died, since a finished task is never delivered again).
-- KEYS[1] - the executor's claims hash (task id -> 'cancel', or
--           'run:<starts>:<worker>' once a worker started it)
-- ARGV[1] - task id
-- ARGV[2] - worker id
-- ARGV[3] - max attempts
-- return the start number (1 the first time, more for a retry), 0 if the
-- future was cancelled, -1 if it was started max_attempts times already (in
-- both cases the mark is removed: the task is over)
local state = redis.call('HGET', KEYS[1], ARGV[1])
if state == 'cancel' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
local starts = 0
if state then starts = tonumber(string.match(state, '^run:(%d+):')) or 1 end
if starts >= tonumber(ARGV[3]) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return -1
end
redis.call('HSET', KEYS[1], ARGV[1], 'run:' .. (starts + 1) .. ':' .. ARGV[2])
return starts + 1
