-- Put one item (protocol Put, non-blocking form). The producer role is only
-- checked, never held across round trips: inside one script, taking the
-- token and giving it back is the same as seeing it there.
-- Items always go into the list, and count against the bound there until a
-- consumer's get takes them. If a consumer is registered as waiting (it holds
-- the consumer role while the queue is empty), it is woken with the entry 's:'
-- in its inbox and takes the item itself (get.lua 'woken'): a waiter that died
-- meanwhile takes nothing with it, and the items stay in order for the next.
-- KEYS[1]  - the items (a list; a sorted set for LIFO and priority queues), whose name <base>
--            names every other key the script uses: <base> followed by a suffix (one hash
--            slot: the base's hash tag is in every one; a call sends one key name, as get.lua's):
--            :bound, :producer_free, :producer, :closed, :not_full, :stats:produced_messages,
--            :stats:produced_bytes,
--            :pressure:waiter (identifier of the waiting consumer),
--            :pressure:lease (names the waiter while its lease runs: no lease, no wake-up),
--            :pressure:delivery_seq (the sequence of LIFO and priority members, and of
--              delayed items),
--            :pressure:delayed (sorted set of delayed items by due time; see lib.lua
--              move_due): due ones move into the items first, as far as the bound allows.
--              Delayed items count against the bound here, as queued ones do,
--            and, only by puts with ARGV[8]: :pressure:redeliveries and the lists named after
--              it (the states of queued copies: their ttl, ttr and utube key; lib.lua
--              copies_push), :pressure:meta (a delayed copy's state; lib.lua state_of) and
--              :pressure:utube (items per utube key; the items waiting behind a key's current
--              one in the list '<:pressure:utube>:<key>', their states in
--              '<:pressure:utube>_meta:<key>'; lib.lua utube_done)
-- ARGV[1] - client identifier
-- ARGV[2] - payload; with ARGV[3] 'm' or 'M', '<count>:<bytes>' instead (see below)
-- ARGV[3] - '1' if the caller asked to block with a negative timeout, else '0'; 'M' and 'm'
--           say the same and that the payloads move natively: the caller sends this script in a
--           MULTI followed by 'LSET <gate> 0 <first payload>', for a batch 'LPUSHX <gate> <the
--           rest, in order>', and 'RENAME <gate> <base>', then EXEC (<gate> is
--           <base>:pressure:gate). The script decides and accounts (ARGV[2] gives how many payloads
--           and their bytes); when they go in, it renames the items list to <gate> and puts one
--           placeholder at its head, which the LSET replaces: the payloads' bytes never enter Lua.
--           When it refuses, <gate> does not exist, and the LSET and the RENAME fail while the
--           LPUSHX does nothing: nothing is pushed. A script that never ran (NOSCRIPT) leaves the
--           same. FIFO items only, with no delay or state (ARGV[6..8] ''), all or none: -10 when
--           the bound leaves room for some of a batch but not all (nothing changed but the due
--           delayed items let in: the caller sends them as arguments); -10 too where the
--           server refuses the script RENAME (an ACL user without it)
-- ARGV[4] - '1' if the caller took a :not_full element while waiting (it is
--           given back when another client holds the producer role)
-- ARGV[5] - inbox key prefix (:pressure:inbox:); the waiter's inbox is this
--           prefix followed by its identifier (same hash slot as the queue)
-- ARGV[6] - the item's order key (priority queues; see items_zset.lua), else ''
-- ARGV[7] - delay in ms ('' or '0': none): the items wait in :pressure:delayed until due, counted
--           in :stats:produced_* at once (so join() waits for them), not in the list
-- ARGV[8] - ttl, ttr and utube key: '' (none), or '<ttl ms>|<ttr ms>|<d>|<key>' (any part
--           may be empty; 'd': dead-letter the item when it expires, else drop it): the state of
--           every item put (lib.lua state_of), the ttl counted from when it is due (a delay extends it).
--           With a key (FIFO queues, no delay), an item enters the queue only when it is its
--           key's only one; else it waits behind the others in its key's list
-- ARGV[9..] - more items for put_many: on a FIFO queue each is its payload, on LIFO and
--           priority queues two arguments, payload and order key (ITEM_ARGS). They
--           go in after ARGV[2], in order, as many as the bound leaves room for
-- return the queue length after the put (>= 0; the list's, without delayed items) on success, or
--   -1 full, nothing pushed
--   -2 the producer role is held by another client and the queue is not full
--   -3 the queue is closed
--   -4 the queue does not exist
--   -7 negative timeout on a bounded queue (queue.Queue raises ValueError)
--   -10 (ARGV[3] 'm'/'M') not all of the batch fits, or RENAME is refused: nothing pushed
-- With ARGV[9..], success is {the length, how many of the items went in (>= 1)};
-- the negative codes are returned as they are (then none went in).
local items_key = KEYS[1]
local client_id, payload, negative_timeout = ARGV[1], ARGV[2], ARGV[3]
local took_permit, inbox_prefix, order_key = ARGV[4], ARGV[5], ARGV[6]
local delay = tonumber(ARGV[7]) or 0
local meta_arg = ARGV[8]
local native = negative_timeout == 'm' or negative_timeout == 'M'
local native_count, native_bytes = nil, nil  -- (checked here: bad input changes nothing)
if native then
  if negative_timeout == 'M' then negative_timeout = '1' end
  if ITEMS_TYPE ~= 'list' or order_key ~= '' or delay ~= 0 or meta_arg ~= '' or #ARGV > 8 then
    return redis.error_reply('PRESSURE native puts are FIFO items with no delay or state')
  end
  native_count, native_bytes = string.match(payload, '^(%d+):(%d+)$')
  native_count = tonumber(native_count)
  if not native_count or native_count < 1 then
    return redis.error_reply('PRESSURE bad native put ' .. payload)
  end
end
local bound_key, producer_free = items_key .. ':bound', items_key .. ':producer_free'
local producer, closed, not_full = items_key .. ':producer', items_key .. ':closed', items_key .. ':not_full'
local produced_messages = items_key .. ':stats:produced_messages'
local produced_bytes = items_key .. ':stats:produced_bytes'
local ext = items_key .. ':pressure:'
local waiter_key, lease_key, delivery_seq, delayed = ext .. 'waiter', ext .. 'lease', ext .. 'delivery_seq', ext .. 'delayed'
local meta, utube, utube_key, copies = nil, nil, nil, nil
if meta_arg ~= '' then
  meta, utube, copies = ext .. 'meta', ext .. 'utube', ext .. 'redeliveries'
  utube_key = string.match(meta_arg, '^[^|]*|[^|]*|[^|]*|(.+)$')
end
-- the string keys in one MGET (lib.lua read: a false value is read again with GET)
local values = redis.call('MGET', bound_key, waiter_key, lease_key, produced_messages, produced_bytes,
                          producer)
local raw = read(bound_key, values[1])
if not raw then return -4 end
local bound = bound_of(raw)
if not bound then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. bound_key)
end
-- :closed and :pressure:delayed in one look: neither is there in the common case
local flags = redis.call('EXISTS', closed, delayed)
if flags > 0 and redis.call('EXISTS', closed) == 1 then
  -- pass the wake-up on: producers blocked on :not_full wake and see the close
  redis.call('LPUSH', not_full, '1')
  redis.call('LTRIM', not_full, '0', '0')
  return -3
end
if negative_timeout == '1' and bound > 0 then return -7 end
-- every read comes before the first write: a key of the wrong type fails here, changing nothing
local len = items_len(items_key)
local permits = redis.call('LLEN', not_full)
-- (a :pressure:waiter or :pressure:lease of another type reads as none: no wake-up, and put
-- writes neither)
local waiter, lease = values[2], values[3]
counter_of(produced_messages, values[4])
counter_of(produced_bytes, values[5])
local waiting = 0  -- delayed items
if flags > 0 then
  waiting = redis.call('ZCARD', delayed)
end
local full = bound > 0 and len + waiting >= bound
if redis.call('LLEN', producer_free) == 0 then
  if full then return -1 end
  if took_permit == '1' then
    -- the producer holding the role may be waiting for the permit we took
    redis.call('LPUSH', not_full, '1')
    redis.call('LTRIM', not_full, '0', '0')
  end
  return -2
end
if read(producer, values[6]) ~= client_id then redis.call('SET', producer, client_id) end
if full then
  redis.call('DEL', not_full)
  return -1
end
if waiting > 0 then
  local room = false
  if bound > 0 then room = bound - len end
  waiting = move_due(delayed, items_key, room, items_push_all)
  len = items_len(items_key)
end
local more = (#ARGV - 8) / ITEM_ARGS
local put = 1
local expires_at = ''
if meta_arg ~= '' then
  local ttl, rest = string.match(meta_arg, '^(%d*)(|.*)$')
  if ttl ~= '' then expires_at = now_ms() + delay + tonumber(ttl) end
  meta_arg = '|' .. expires_at .. rest  -- each item's state: no deliveries yet
end
-- the item as stored; its state (if it has one) kept as a queued copy's
local function stored(item, order)
  local wrapped = items_wrap(delivery_seq, item, order)
  if meta_arg ~= '' then copies_push(copies, wrapped, meta_arg, false) end
  return wrapped
end
-- into the sorted set, due at `due`, with its state (if it has one) as a delayed copy's
local function put_delayed(due, item, order)
  local member = delayed_member(delivery_seq, items_wrap(delivery_seq, item, order))
  redis.call('ZADD', delayed, due, member)
  if meta_arg ~= '' then redis.call('HSET', meta, 'z' .. string.sub(member, 1, 16), meta_arg) end
end
if delay > 0 then
  -- into the sorted set, due in `delay` ms, the batch in order, as far as the bound allows
  local due = now_ms() + delay
  local room = more
  if bound > 0 then room = math.min(more, bound - len - waiting - 1) end
  local bytes = #payload
  put_delayed(due, payload, order_key)
  for i = 1, room do
    local first = 9 + (i - 1) * ITEM_ARGS
    bytes = bytes + #ARGV[first]
    put_delayed(due, ARGV[first], ARGV[first + 1] or '')
  end
  put = put + room
  waiting = waiting + put
  redis.call('INCRBY', produced_messages, put)
  redis.call('INCRBY', produced_bytes, bytes)
elseif native then
  -- the payloads move by the commands behind this script (see ARGV[3]): here, the decision
  -- and the accounting; the items list is <gate> until the RENAME behind them
  local count = native_count
  if bound > 0 and len + waiting + count > bound then return -10 end
  local gate = ext .. 'gate'
  if len > 0 then
    -- a user the ACL refuses RENAME gets the arguments' way: -10, nothing changed
    local renamed = redis.pcall('RENAME', items_key, gate)
    if type(renamed) == 'table' and renamed.err then return -10 end
  else
    redis.call('DEL', gate)  -- (never left behind by pressure: whatever another client made)
  end
  redis.call('LPUSH', gate, '')
  redis.call('INCRBY', produced_messages, count)
  redis.call('INCRBY', produced_bytes, native_bytes)
  len = len + count
  put = count
  more = count - 1
elseif utube_key then
  -- each item is its key's current one (into the queue) or waits behind it
  local room = more
  if bound > 0 then room = math.min(more, bound - len - waiting - 1) end
  local bytes = 0
  for i = 0, room do
    local item = payload
    if i > 0 then item = ARGV[8 + i] end
    bytes = bytes + #item
    if redis.call('HINCRBY', utube, utube_key, '1') == 1 then
      len = items_push(items_key, stored(item, ''))
    else
      redis.call('LPUSH', utube .. ':' .. utube_key, item)
      redis.call('LPUSH', utube .. '_meta:' .. utube_key, meta_arg)
    end
  end
  put = 1 + room
  redis.call('INCRBY', produced_messages, put)
  redis.call('INCRBY', produced_bytes, bytes)
else
  -- the first item
  redis.call('INCR', produced_messages)
  redis.call('INCRBY', produced_bytes, #payload)
  len = items_push(items_key, stored(payload, order_key))
  -- the rest of a batch, while there is room
  if more > 0 then
    local room = more
    if bound > 0 then room = math.min(more, bound - len - waiting) end
    if room > 0 and meta_arg ~= '' then
      local items, bytes = {}, 0
      for i = 1, room do
        local first = 9 + (i - 1) * ITEM_ARGS
        bytes = bytes + #ARGV[first]
        items[i] = stored(ARGV[first], ARGV[first + 1] or '')
      end
      len = items_push_all(items_key, items)
      redis.call('INCRBY', produced_messages, room)
      redis.call('INCRBY', produced_bytes, bytes)
    elseif room > 0 then
      local bytes
      len, bytes = items_push_args(items_key, delivery_seq, 9, room)
      redis.call('INCRBY', produced_messages, room)
      redis.call('INCRBY', produced_bytes, bytes)
    end
    put = put + room
  end
end
keep_permit(not_full, len + waiting, bound, permits)
nudge_waiter(waiter, lease, inbox_prefix)
if more > 0 then return {len, put} end
return len
