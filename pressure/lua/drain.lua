-- Discard every queued item with the consumer role (shutdown(immediate=True)).
-- Unfinished tasks drop by the number discarded, never below zero.
-- KEYS[1] - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2] - :bound
-- KEYS[3] - :consumer_free
-- KEYS[4] - :consumer
-- KEYS[5] - :not_full
-- KEYS[6] - :stats:produced_messages
-- KEYS[7] - :pressure:tasks_done
-- KEYS[8] - :pressure:discarded
-- KEYS[9] - :pressure:all_tasks_done (stream that wakes join())
-- ARGV[1] - client identifier
-- return the number of items discarded, -2 if the consumer role is held by
-- another client, -4 if the queue does not exist
if redis.call('EXISTS', KEYS[2]) == 0 then return -4 end
local n = items_len(KEYS[1])  -- read first: a wrong type fails before any write
local produced = counter(KEYS[6])
local done = counter(KEYS[7])
counter(KEYS[8])
redis.call('LLEN', KEYS[5])
if redis.call('LLEN', KEYS[3]) == 0 then return -2 end
redis.call('SET', KEYS[4], ARGV[1])
if n > 0 then
  redis.call('DEL', KEYS[1])
  redis.call('INCRBY', KEYS[8], n)
  local drop = math.min(n, math.max(produced - done, 0))
  if drop > 0 then
    done = redis.call('INCRBY', KEYS[7], drop)
    if done >= produced then
      redis.call('XADD', KEYS[9], 'MAXLEN', 1, '*', 'done', done)
    end
  end
end
redis.call('LPUSH', KEYS[5], 1)
redis.call('LTRIM', KEYS[5], 0, 0)
return n
