-- Mark one task done. Unfinished tasks = :stats:produced_messages - tasks done,
-- so items put by any conforming client count, whoever put them.
-- KEYS[1] - :bound
-- KEYS[2] - :stats:produced_messages
-- KEYS[3] - :pressure:tasks_done
-- KEYS[4] - :pressure:all_tasks_done (stream that wakes join())
-- return the unfinished count left, -1 if task_done() was called too many
-- times, -4 if the queue does not exist
if redis.call('EXISTS', KEYS[1]) == 0 then return -4 end
local produced = tonumber(redis.call('GET', KEYS[2]) or '0')
local done = tonumber(redis.call('GET', KEYS[3]) or '0')
if done >= produced then return -1 end
done = redis.call('INCR', KEYS[3])
if done >= produced then
  redis.call('XADD', KEYS[4], 'MAXLEN', 1, '*', 'done', done)
end
return produced - done
