-- A worker starts tasks it received (a prefetched batch at once), unless a
-- task's future was cancelled or the task has already been started
-- max_attempts times (each of its workers died, since a finished task is
-- never delivered again).
-- KEYS[1] - the executor's claims hash (task id -> 'cancel', or
--           'run:<starts>:<worker>' once a worker started it)
-- ARGV[1] - worker id
-- ARGV[2..] - per task, two arguments: its id and its max attempts
-- return, per task: its start number (1 the first time, more for a retry),
-- 0 if its future was cancelled, -1 if it was started max_attempts times
-- already (in both cases the mark is removed: the task is over)
local out = {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local max_attempts = tonumber(ARGV[i + 1])
  local state = redis.call('HGET', KEYS[1], id)
  if state == 'cancel' then
    redis.call('HDEL', KEYS[1], id)
    out[#out + 1] = 0
  else
    local starts = 0
    if state then starts = tonumber(string.match(state, '^run:(%d+):')) or 1 end
    if starts >= max_attempts then
      redis.call('HDEL', KEYS[1], id)
      out[#out + 1] = -1
    else
      redis.call('HSET', KEYS[1], id, 'run:' .. (starts + 1) .. ':' .. ARGV[1])
      out[#out + 1] = starts + 1
    end
  end
end
return out
