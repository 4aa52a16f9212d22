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
-- KEYS[9..] - every other key of the queue, deleted at the end (with :pressure:utube and
--            :pressure:redeliveries, the lists named after them and each of their fields)
-- ARGV[1] - 'begin' or 'finish'
-- ARGV[2] - inbox key prefix (:pressure:inbox:), to wake the waiting consumer
-- ARGV[3] - in-flight key prefix (:pressure:inflight:)
-- ARGV[4] - held-batch key prefix (:pressure:held:)
-- ARGV[5] - :pressure:logs (the set naming the logs kept beside the queue: they go too)
-- return 1 deleted, -4 no such queue ('begin'), -8 re-created meanwhile,
--        -10 waiting for the producer token, -11 waiting for the consumer token
local bound_key, not_full, closed = KEYS[1], KEYS[2], KEYS[3]
local producer_free, consumer_free, waiter_key = KEYS[4], KEYS[5], KEYS[6]
local lease_key, consumers = KEYS[7], KEYS[8]
local step, inbox_prefix, inflight_prefix = ARGV[1], ARGV[2], ARGV[3]
local held_prefix, logs = ARGV[4], ARGV[5]
if step == 'begin' then
  if redis.call('EXISTS', bound_key) == 0 then return -4 end
  -- read first: a key of the wrong type fails here, before anything is deleted
  for _, key in ipairs({not_full, closed, producer_free, consumer_free}) do redis.call('LLEN', key) end
  redis.call('DEL', bound_key)
  redis.call('LPUSH', not_full, '1')
  redis.call('LPUSH', closed, '1', '1')
  wake_waiter(waiter_key, lease_key, consumer_free, inbox_prefix)
elseif redis.call('EXISTS', bound_key) == 1 then
  return -8
end
if redis.call('LLEN', producer_free) == 0 then return -10 end
if redis.call('LLEN', consumer_free) == 0 then return -11 end
for _, id in ipairs(redis.call('HKEYS', consumers)) do
  redis.call('DEL', inbox_prefix .. id, inflight_prefix .. id, held_prefix .. id)
end
forget_logs(logs)
for i = 9, #KEYS do
  if string.sub(KEYS[i], -6) == ':utube' then  -- the lists of items waiting behind a utube key
    for _, utube_key in ipairs(redis.call('HKEYS', KEYS[i])) do
      redis.call('DEL', KEYS[i] .. ':' .. utube_key, KEYS[i] .. '_meta:' .. utube_key)
    end
  elseif string.sub(KEYS[i], -13) == ':redeliveries' then  -- queued copies' states
    copies_forget(KEYS[i])
  end
end
redis.call('DEL', unpack(KEYS))
return 1
