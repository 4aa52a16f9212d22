-- Put one item (protocol Put, non-blocking form). The producer role is only
-- checked, never held across round trips: inside one script, taking the
-- token and giving it back is the same as seeing it there.
-- If a consumer is registered as waiting (it holds the consumer role while the
-- queue is empty), the oldest item goes straight into that consumer's inbox
-- and the consumer's side of Get is done here: stats, role given back.
-- KEYS[1]  - the items (a list; a sorted set for LIFO and priority queues)
-- KEYS[2]  - :bound
-- KEYS[3]  - :producer_free
-- KEYS[4]  - :producer
-- KEYS[5]  - :closed
-- KEYS[6]  - :not_full
-- KEYS[7]  - :stats:produced_messages
-- KEYS[8]  - :stats:produced_bytes
-- KEYS[9]  - :consumer_free
-- KEYS[10] - :stats:consumed_messages
-- KEYS[11] - :stats:consumed_bytes
-- KEYS[12] - :pressure:waiter (identifier of the waiting consumer)
-- KEYS[13] - :pressure:lease (names the waiter while its lease runs: no lease, no hand-off)
-- KEYS[14] - :pressure:redeliveries (hash: sha1(payload) -> deliveries so far)
-- KEYS[15] - :pressure:delivery_seq
-- ARGV[1] - client identifier
-- ARGV[2] - payload
-- ARGV[3] - '1' if the caller asked to block with a negative timeout
-- ARGV[4] - '1' if the caller took a :not_full element while waiting (it is
--           given back when another client holds the producer role)
-- ARGV[5] - inbox key prefix (:pressure:inbox:); the waiter's inbox is this
--           prefix followed by its identifier (same hash slot as the queue).
--           The entry handed over is '<seq>:<deliveries>:<ms>:<item>',
--           as get.lua makes it
-- ARGV[6] - the item's order key (priority queues; see items_zset.lua), else ''
-- ARGV[7..] - more items for put_many: on a FIFO queue each is its payload, on LIFO and
--           priority queues two arguments, payload and order key (ITEM_ARGS). They
--           go in after ARGV[2], in order, as many as the bound leaves room for
-- return the queue length after the put (>= 0) on success, or
--   -1 full, nothing pushed
--   -2 the producer role is held by another client and the queue is not full
--   -3 the queue is closed
--   -4 the queue does not exist
--   -7 negative timeout on a bounded queue (queue.Queue raises ValueError)
-- With ARGV[7..], success is {the length, how many of the items went in (>= 1)};
-- the negative codes are returned as they are (then none went in).
local raw = redis.call('GET', KEYS[2])
if not raw then return -4 end
local bound = bound_of(raw)
if not bound then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. KEYS[2])
end
if redis.call('EXISTS', KEYS[5]) == 1 then
  -- pass the wake-up on: producers blocked on :not_full wake and see the close
  redis.call('LPUSH', KEYS[6], 1)
  redis.call('LTRIM', KEYS[6], 0, 0)
  return -3
end
if ARGV[3] == '1' and bound > 0 then return -7 end
-- every read comes before the first write: a key of the wrong type fails here, changing nothing
local len = items_len(KEYS[1])
local permits = redis.call('LLEN', KEYS[6])
local consumer_free = redis.call('LLEN', KEYS[9])
local waiter = redis.call('GET', KEYS[12])
local lease = redis.call('GET', KEYS[13])
counter(KEYS[7])
counter(KEYS[8])
local full = bound > 0 and len >= bound
if redis.call('LLEN', KEYS[3]) == 0 then
  if full then return -1 end
  if ARGV[4] == '1' then
    -- the producer holding the role may be waiting for the permit we took
    redis.call('LPUSH', KEYS[6], 1)
    redis.call('LTRIM', KEYS[6], 0, 0)
  end
  return -2
end
if redis.call('GET', KEYS[4]) ~= ARGV[1] then redis.call('SET', KEYS[4], ARGV[1]) end
if full then
  redis.call('DEL', KEYS[6])
  return -1
end
-- the first item (and a waiting consumer gets it, or the oldest queued, at once)
redis.call('INCR', KEYS[7])
redis.call('INCRBY', KEYS[8], #ARGV[2])
local item = items_wrap(KEYS[15], ARGV[2], ARGV[6])
if waiter and lease == waiter then
  local deliveries = 1
  if len > 0 then
    -- items a plain spec producer (or a requeue) left while the consumer waited go first
    items_push(KEYS[1], item)
    item = items_pop(KEYS[1])
    if redis.call('EXISTS', KEYS[14]) == 1 then
      local digest = redis.sha1hex(item)
      deliveries = 1 + tonumber(redis.call('HGET', KEYS[14], digest) or '0')
      redis.call('HDEL', KEYS[14], digest)
    end
  end
  local now = redis.call('TIME')
  redis.call('LPUSH', ARGV[5] .. waiter, redis.call('INCR', KEYS[15]) .. ':' .. deliveries .. ':'
      .. (now[1] * 1000 + math.floor(now[2] / 1000)) .. ':' .. item)
  redis.call('INCR', KEYS[10])
  redis.call('INCRBY', KEYS[11], items_size(item))
  redis.call('DEL', KEYS[12])
  if consumer_free == 0 then redis.call('LPUSH', KEYS[9], 1) end
else
  len = items_push(KEYS[1], item)
end
-- the rest of a batch, while there is room
local more = (#ARGV - 6) / ITEM_ARGS
local put = 1
if more > 0 then
  local room = more
  if bound > 0 then room = math.min(more, bound - len) end
  if room > 0 then
    local bytes
    len, bytes = items_push_args(KEYS[1], KEYS[15], 7, room)
    redis.call('INCRBY', KEYS[7], room)
    redis.call('INCRBY', KEYS[8], bytes)
  end
  put = put + room
end
keep_permit(KEYS[6], len, bound, permits)
if more > 0 then return {len, put} end
return len
