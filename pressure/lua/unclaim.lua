-- A worker gives back tasks it claimed but will not run (it is busy with a
-- long task, or stopping): each start it counted is taken back, so the
-- worker that runs the task next is not charged an attempt.
-- KEYS[1] - the executor's claims hash (task id -> 'cancel' or 'run:<starts>:<worker>')
-- ARGV[1] - worker id
-- ARGV[2..] - task ids
-- return how many claims were taken back
local taken = 0
for i = 2, #ARGV do
  local state = redis.call('HGET', KEYS[1], ARGV[i])
  local starts, worker = string.match(state or '', '^run:(%d+):(.*)$')
  if worker == ARGV[1] then
    starts = tonumber(starts)
    if starts <= 1 then
      redis.call('HDEL', KEYS[1], ARGV[i])
    else
      redis.call('HSET', KEYS[1], ARGV[i], 'run:' .. (starts - 1) .. ':' .. worker)
    end
    taken = taken + 1
  end
end
return taken
