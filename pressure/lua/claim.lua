-- A worker is about to start a task it received: decide whether it runs. Every
-- delivery of a task passes through here just before the task would start (a
-- redelivery too, and a second copy left by a submit retried after a lost
-- reply), and the decision stays in the claims hash until the delivery is
-- settled (settle.lua removes it with the acknowledgement, in one step): a
-- worker that dies before reporting leaves the same decision to the next
-- delivery. Tasks a worker only prefetched are never counted.
-- Marks (claims hash, task id ->): 'q' submitted (submit.lua); 'cancel' its
-- future was cancelled (cancel.lua); 'run:<starts>:<consumer>:<delivery>'
-- started; 'lost:<starts>:<consumer>:<delivery>' given up on. No mark: the
-- task has finished (settled).
-- KEYS[1] - the executor's claims hash
-- KEYS[2] - this worker's in-flight list of the task queue (:pressure:inflight:<consumer>)
-- KEYS[3] - the executor's :stats:retried counter (starts after the first)
-- KEYS[4] - the executor's :stats:lost counter (tasks given up on)
-- ARGV[1] - this worker's consumer id (of the task queue)
-- ARGV[2] - the delivery number
-- ARGV[3] - the task id
-- ARGV[4] - the task's max attempts
-- ARGV[5] - the task queue's in-flight list prefix (:pressure:inflight:)
-- return the start number (1 the first time, more for a retry: run it); 0 its
-- future was cancelled; -1 it was started max attempts times already (give up:
-- WorkerLost); -2 another delivery of it is held by a worker, or it has
-- finished (drop this copy, keep the mark); -3 this delivery is no longer this
-- worker's (it went back to the queue): leave it alone. Asking again about the
-- same delivery gives the same answer and counts nothing twice.
local claims, inflight, retried = KEYS[1], KEYS[2], KEYS[3]
local lost = KEYS[4]
local consumer_id, delivery, task_id = ARGV[1], ARGV[2], ARGV[3]
local max_attempts, inflight_prefix = ARGV[4], ARGV[5]

-- Whether the in-flight list `list` holds delivery `seq`.
local function holds(list, seq)
  local prefix = seq .. ':'
  for _, entry in ipairs(redis.call('LRANGE', list, 0, -1)) do
    if string.sub(entry, 1, #prefix) == prefix then return true end
  end
  return false
end

if not holds(inflight, delivery) then return -3 end
local state = redis.call('HGET', claims, task_id)
if not state then return -2 end
if state == 'cancel' then return 0 end
local kind, starts, consumer, seq = string.match(state, '^(%a+):(%d+):(.*):(%d+)$')
if kind then
  starts = tonumber(starts)
  if consumer == consumer_id and seq == delivery then  -- decided already (a lost reply)
    if kind == 'run' then return starts end
    return -1
  end
  if holds(inflight_prefix .. consumer, seq) then return -2 end
else  -- 'q', or a mark no claim wrote: nobody started it
  kind, starts = 'q', 0
end
local mark = ':' .. consumer_id .. ':' .. delivery
if starts >= tonumber(max_attempts) then
  redis.call('HSET', claims, task_id, 'lost:' .. starts .. mark)
  if kind ~= 'lost' then redis.call('INCR', lost) end
  return -1
end
redis.call('HSET', claims, task_id, 'run:' .. (starts + 1) .. mark)
if starts > 0 then redis.call('INCR', retried) end
return starts + 1
