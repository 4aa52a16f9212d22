-- Delete the queue (protocol Delete) without ever holding a role token across
-- round trips: 'begin' removes :bound and wakes blocked clients; the queue's
-- keys go only once both role tokens are back, in one atomic step.
-- KEYS[1] - :bound
-- KEYS[2] - :not_full
-- KEYS[3] - :closed
-- KEYS[4] - :producer_free
-- KEYS[5] - :consumer_free
-- KEYS[6] - :pressure:waiter
-- KEYS[7] - :pressure:lease
-- KEYS[8] - :pressure:consumers (their inbox, in-flight and held lists go too)
-- KEYS[9..] - every other key of the queue, deleted at the end
-- ARGV[1] - 'begin' or 'finish'
-- ARGV[2] - inbox key prefix (:pressure:inbox:), to wake the waiting consumer
-- ARGV[3] - in-flight key prefix (:pressure:inflight:)
-- ARGV[4] - held-batch key prefix (:pressure:held:)
-- ARGV[5] - :pressure:logs (the set naming the logs kept beside the queue: they go too)
-- return 1 deleted, -4 no such queue ('begin'), -8 re-created meanwhile,
--        -10 waiting for the producer token, -11 waiting for the consumer token
if ARGV[1] == 'begin' then
  if redis.call('EXISTS', KEYS[1]) == 0 then return -4 end
  -- read first: a key of the wrong type fails here, before anything is deleted
  for i = 2, 5 do redis.call('LLEN', KEYS[i]) end
  redis.call('DEL', KEYS[1])
  redis.call('LPUSH', KEYS[2], 1)
  redis.call('LPUSH', KEYS[3], 1, 1)
  wake_waiter(KEYS[6], KEYS[7], KEYS[5], ARGV[2])
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return -8
end
if redis.call('LLEN', KEYS[4]) == 0 then return -10 end
if redis.call('LLEN', KEYS[5]) == 0 then return -11 end
for _, id in ipairs(redis.call('HKEYS', KEYS[8])) do
  redis.call('DEL', ARGV[2] .. id, ARGV[3] .. id, ARGV[4] .. id)
end
forget_logs(ARGV[5])
redis.call('DEL', unpack(KEYS))
return 1
