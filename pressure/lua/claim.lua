-- A worker claims tasks it received: it is about to start the first, and the
-- others, received with it (prefetched), are its to start next. Every delivery
-- of a task passes through here before the task would start (a redelivery too,
-- and a second copy left by a submit retried after a lost reply), and the
-- decision stays in the claims hash until the delivery is settled (settle.lua
-- removes it with the acknowledgement, in one step): a worker that dies before
-- reporting leaves the same decision to the next delivery.
-- A task claimed to start now is counted at once ('run'); one claimed to start
-- next is marked 'pre' (no longer cancellable while this worker holds it, not
-- counted yet), and the worker counts it just before it starts it, with a
-- count_start.lua call (its '<task id>:started' field), sent without waiting
-- for the reply (no round trip); a later claim folds that field into the
-- mark. So a task a worker only prefetched is never counted: if the worker
-- dies, it comes back with its count unchanged; if it goes back to the queue
-- (given back), cancel.lua may cancel it again.
-- Marks (claims hash, task id ->): 'q' submitted (submit.lua); 'cancel' its
-- future was cancelled (cancel.lua); 'pre:<starts>:<consumer>:<delivery>'
-- claimed, to start next (started once more if '<task id>:started' is 1);
-- 'run:<starts>:<consumer>:<delivery>' started; 'lost:<starts>:<consumer>:<delivery>'
-- given up on. No mark: the task has finished (settled).
-- KEYS[1] - the executor's claims hash
-- KEYS[2] - this worker's in-flight list of the task queue (:pressure:inflight:<consumer>)
-- KEYS[3] - the executor's :stats:retried counter (starts after the first)
-- KEYS[4] - the executor's :stats:lost counter (tasks given up on)
-- ARGV[1] - this worker's consumer id (of the task queue)
-- ARGV[2] - the task queue's in-flight list prefix (:pressure:inflight:)
-- ARGV[3..] - per task, in the order the worker will start them (the first
--             now, the others next): the delivery number, the task id, the
--             task's max attempts
-- return per task: its start number (>= 1: run it; for a task to start next,
-- the number it will have); 0 its future was cancelled; -1 it was started max
-- attempts times already (give up: WorkerLost); -2 another delivery of it is
-- held by a worker, or it has finished (drop this copy, keep the mark); -3
-- this delivery is no longer this worker's (it went back to the queue): leave
-- it alone. Asking again about the same delivery gives the same answer and
-- counts nothing twice.
local claims, inflight, retried = KEYS[1], KEYS[2], KEYS[3]
local lost = KEYS[4]
local consumer_id, inflight_prefix = ARGV[1], ARGV[2]

-- The delivery numbers an in-flight list holds (its entries are '<delivery>:...').
local function held_by(list)
  local seqs = {}
  for _, entry in ipairs(redis.call('LRANGE', list, '0', '-1')) do
    local seq = string.match(entry, '^(%d+):')
    if seq then seqs[seq] = true end
  end
  return seqs
end

local ours = held_by(inflight)

local function claim(delivery, task_id, max_attempts, now)
  if not ours[delivery] then return -3 end
  local state = redis.call('HGET', claims, task_id)
  if not state then return -2 end
  if state == 'cancel' then return 0 end
  local kind, starts, consumer, seq = string.match(state, '^(%a+):(%d+):(.*):(%d+)$')
  local counted = false  -- a 'pre' task its worker counted as it started it
  if kind then
    starts = tonumber(starts)
    if kind == 'pre' then
      local more = tonumber(redis.call('HGET', claims, task_id .. ':started') or '0') or 0
      starts, counted = starts + more, more > 0
    end
    if consumer == consumer_id and seq == delivery then  -- claimed by this call's worker already
      if kind == 'lost' then return -1 end
      if kind == 'run' or counted then return starts end
      if not now then return starts + 1 end  -- 'pre' asked again (a lost reply)
      -- 'pre', now starting: counted below
    elseif held_by(inflight_prefix .. consumer)[seq] then
      return -2
    end
    -- else its worker no longer holds that delivery (dead, or it gave the task back):
    -- 'run' and 'lost' were starts, 'pre' was not; 'starts' says so
  else  -- 'q', or a mark no claim wrote: nobody started it
    kind, starts = 'q', 0
  end
  local mark = ':' .. consumer_id .. ':' .. delivery
  if kind == 'pre' then redis.call('HDEL', claims, task_id .. ':started') end  -- in 'starts' now
  if starts >= tonumber(max_attempts) then
    redis.call('HSET', claims, task_id, 'lost:' .. starts .. mark)
    if kind ~= 'lost' then redis.call('INCR', lost) end
    return -1
  end
  if not now then
    redis.call('HSET', claims, task_id, 'pre:' .. starts .. mark)
    return starts + 1
  end
  redis.call('HSET', claims, task_id, 'run:' .. (starts + 1) .. mark)
  if starts > 0 then redis.call('INCR', retried) end
  return starts + 1
end

local decisions = {}
for i = 3, #ARGV, 3 do
  decisions[#decisions + 1] = claim(ARGV[i], ARGV[i + 1], ARGV[i + 2], i == 3)
end
return decisions
