-- Where the items live, for FIFO queues (the protocol's layout): the list
-- <prefix>:<name>, LPUSH in, RPOP out. Put in front of every script of a
-- FIFO queue, after lib.lua; items_zset.lua defines the same functions for
-- the ordered queues. An "item" here is what a delivery entry carries.
local ITEMS_TYPE = 'list'

-- How many items are queued (a key of another type is an error, before any write).
local function items_len(key)
  return redis.call('LLEN', key)
end

-- The item to store for a new payload (FIFO: the payload itself).
local function items_wrap(seq_key, payload, order)
  return payload
end

-- Queue a new item at the tail; return the new length.
local function items_push(key, item)
  return redis.call('LPUSH', key, item)
end

-- Take the next item out, or false.
local function items_pop(key)
  return redis.call('RPOP', key)
end

-- Queue several new items at the tail, in order (one command); return the new length.
local function items_push_all(key, items)
  return redis.call('LPUSH', key, unpack(items))
end

-- How many arguments each further item of put_many takes: a FIFO item is its payload alone.
local ITEM_ARGS = 1

-- Queue `count` new items, in order, from put_many's arguments ARGV[first..] (ITEM_ARGS
-- each; one command); return the new length and the payload bytes.
local function items_push_args(key, seq_key, first, count)
  local last, bytes = first + count - 1, 0
  for i = first, last do bytes = bytes + #ARGV[i] end
  return redis.call('LPUSH', key, unpack(ARGV, first, last)), bytes
end

-- Take n items out, next-out first (n <= the length): one RPOP with a count, unless the
-- first is large (a reply of many large items costs Redis more to build than one per item).
local function items_pop_all(key, n)
  local first = redis.call('RPOP', key)
  if #first >= 8192 then
    local items = {first}
    for i = 2, n do items[i] = redis.call('RPOP', key) end
    return items
  end
  local items = redis.call('RPOP', key, n - 1)
  table.insert(items, 1, first)
  return items
end

-- Take all `n` items (n > 1) out by renaming the list to `dest` (which must not exist), so
-- they stay there as they are, newest at the head, not copied; return them next-out first.
-- (A batch that empties the queue: the held list is the items list itself.) Large items
-- are read one at a time, as items_pop_all takes them. nil, changing nothing, when the
-- server refuses RENAME (an ACL user without it): the caller takes them with items_pop_all.
local function items_take_all(key, dest, n)
  local renamed = redis.pcall('RENAME', key, dest)
  if type(renamed) == 'table' and renamed.err then return nil end
  local items = {redis.call('LINDEX', dest, '-1')}
  if #items[1] >= 8192 then
    for i = 2, n do items[i] = redis.call('LINDEX', dest, -i) end
    return items
  end
  local rest = redis.call('LRANGE', dest, '0', '-2')  -- newest first
  for i = #rest, 1, -1 do items[#items + 1] = rest[i] end
  return items
end

-- Put a delivered item back where it came from: the head, next out.
local function items_return(key, item)
  redis.call('RPUSH', key, item)
end

-- The payload bytes an item carries (for :stats:*_bytes).
local function items_size(item)
  return #item
end

-- The payload a stored item carries (FIFO: the item itself).
local function items_payload(item)
  return item
end

-- Remove one stored item from the queue, the next out of its copies; 1 if it was there.
local function items_remove(key, item)
  return redis.call('LREM', key, '-1', item)
end

-- Stored items `first` to `last` (0 the next out), next-out first.
local function items_range(key, first, last)
  local got = redis.call('LRANGE', key, -(last + 1), -(first + 1))
  local out = {}
  for i = #got, 1, -1 do out[#out + 1] = got[i] end
  return out
end

-- Every stored item, next out first.
local function items_all(key)
  local all = redis.call('LRANGE', key, '0', '-1')
  local out = {}
  for i = #all, 1, -1 do out[#out + 1] = all[i] end
  return out
end
