-- Where the items live, for the ordered queues (LIFO and priority, a pressure
-- extension): the sorted set <prefix>:<lifo|priority>:<name>, every score 0,
-- so members sort by their bytes. A member is
--   <order key><16-digit sequence><payload><8-digit length of the order key>
-- The order key comes from the client (priority: an order-preserving encoding
-- of the item; LIFO: empty) and the sequence from :pressure:delivery_seq
-- (priority: rising, so equal keys come out first in, first out; LIFO:
-- falling, so the newest comes out first). A plain spec client meets a sorted
-- set where it expects a list, and fails with WRONGTYPE rather than reorder.
-- The loader puts "local LIFO = true|false" in front of this file.
local ITEMS_TYPE = 'zset'

local function items_len(key)
  return redis.call('ZCARD', key)
end

local function items_wrap(seq_key, payload, order)
  local seq = redis.call('INCR', seq_key)
  if LIFO then seq = 999999999999999 - seq end  -- exact in a Lua number (< 2^53)
  return order .. string.format('%016d', seq) .. payload .. string.format('%08d', #order)
end

local function items_push(key, item)
  redis.call('ZADD', key, '0', item)
  return redis.call('ZCARD', key)
end

local function items_pop(key)
  local popped = redis.call('ZPOPMIN', key)
  return popped[1] or false
end

local function items_push_all(key, items)
  local args = {}
  for i, item in ipairs(items) do
    args[2 * i - 1] = 0
    args[2 * i] = item
  end
  redis.call('ZADD', key, unpack(args))
  return redis.call('ZCARD', key)
end

-- A further item of put_many is two arguments: its payload and its order key.
local ITEM_ARGS = 2

local function items_push_args(key, seq_key, first, count)
  local items, bytes = {}, 0
  for i = 1, count do
    local payload = ARGV[first + 2 * i - 2]
    bytes = bytes + #payload
    items[i] = items_wrap(seq_key, payload, ARGV[first + 2 * i - 1])
  end
  return items_push_all(key, items), bytes
end

local function items_pop_all(key, n)
  local popped = redis.call('ZPOPMIN', key, n)
  local items = {}
  for i = 1, #popped, 2 do items[#items + 1] = popped[i] end
  return items
end

-- items_list.lua takes a whole batch by renaming the list to the held list; a sorted set
-- cannot become that list: none taken (the caller takes them with items_pop_all).
local function items_take_all(key, dest, n)
  return nil
end

-- A member keeps its place in the order: back where it was.
local function items_return(key, item)
  redis.call('ZADD', key, '0', item)
end

local function items_size(item)
  return #item - 24 - (tonumber(string.sub(item, -8)) or 0)
end

local function items_payload(item)
  local order = tonumber(string.sub(item, -8)) or 0
  return string.sub(item, order + 17, -9)
end

local function items_remove(key, item)
  return redis.call('ZREM', key, item)
end

local function items_range(key, first, last)
  return redis.call('ZRANGE', key, first, last)
end

local function items_all(key)
  return redis.call('ZRANGE', key, '0', '-1')
end
