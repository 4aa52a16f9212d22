-- Shared functions: those a script uses (directly or through one another) are put in
-- front of it when it is loaded (the SHA1 covers the combined text; pressure/_packing.py),
-- so no two scripts carry copies of them, and no script makes the closures of the others
-- on every call. A definition ends at the first 'end' at the start of a line.
-- Each script binds its KEYS and ARGV to named locals at its top, named as its
-- header names them (a key after its suffix: not_full, consumer_free, inflight...;
-- with '_key' where the plain name is the value read from it: bound_key, waiter_key,
-- items_key), and its body uses those names only (tests/test_scripts.py checks the
-- headers against the bodies). No such name may be one of the functions below.

-- Stop the script with an error reply carrying `message` (which starts 'PRESSURE ',
-- what the client maps to ProtocolError). Raised as a string, which every server
-- understands: Redis 7+ and Valkey reply 'ERR <message> script: ...', Redis 6.2
-- 'ERR Error running script ...: <message>'. Not error({err = ...}): Redis 6.2's error
-- handler joins the error to its position and fails on a table ("attempt to concatenate
-- local 'err' (a table value)"), so the client would see no ProtocolError.
local function fail(message)
  error(message, 0)
end

-- A counter key (:stats:*, :pressure:tasks_done ...): 0 if missing; anything but
-- plain ASCII digits is an error reply naming the key, raised before any write.
local function counter(key)
  local raw = redis.call('GET', key)
  if not raw then return 0 end
  if not string.match(raw, '^%d+$') or #raw > 15 then
    fail('PRESSURE bad counter ' .. raw .. ' at ' .. key)
  end
  return tonumber(raw)
end

-- Several string keys read in one command (hot scripts: one MGET costs the server about
-- what one GET does). MGET answers false for a missing key and for one of another type
-- alike; `read(key, value)` tells them apart only when it matters: a false value is read
-- again with GET, which fails on a wrong type as a plain GET would have (a missing key,
-- the rare case for the keys read this way, costs that one GET more).
local function read(key, value)
  if value then return value end
  return redis.call('GET', key)
end

-- The entry of an in-flight list `list` that starts with `prefix` ('<delivery>:'), and its
-- index counted from the tail (-1 the last), or nil. Searched from the tail, where the
-- oldest deliveries are (gets push new entries at the head) and which task_done()
-- acknowledges first, a growing chunk at a time: an acknowledgement in delivery order reads
-- a few entries, not the whole list (a consumer holding n deliveries took O(n^2) to
-- acknowledge them all when each call read the whole list).
local function find_entry(list, prefix)
  local len = redis.call('LLEN', list)
  local stop, chunk = -1, 16
  while -stop <= len do
    local entries
    if stop == -1 then  -- text: no number to format (see now_ms_text)
      entries = redis.call('LRANGE', list, '-16', '-1')
    else
      entries = redis.call('LRANGE', list, stop - chunk + 1, stop)
    end
    local last = #entries
    for i = last, 1, -1 do
      if string.sub(entries[i], 1, #prefix) == prefix then return entries[i], stop - (last - i) end
    end
    stop = stop - chunk
    chunk = chunk * 2
  end
  return nil
end

-- counter(key) for a value `value` already read with MGET.
local function counter_of(key, value)
  if not value then return counter(key) end
  if not string.match(value, '^%d+$') or #value > 15 then
    fail('PRESSURE bad counter ' .. value .. ' at ' .. key)
  end
  return tonumber(value)
end

-- The number a :bound value stands for, or nil: plain ASCII digits, at most 15
-- (exact in a Lua number), exactly as the client checks it.
local function bound_of(raw)
  return raw and string.match(raw, '^%d+$') and #raw <= 15 and tonumber(raw) or nil
end

-- Bring :not_full (holding `permits` elements now) to exactly one element while
-- the queue is below its bound, and to none at or above it.
local function keep_permit(key, len, bound, permits)
  if bound == 0 or len < bound then
    if permits > 1 then
      redis.call('LTRIM', key, '0', '0')
    elseif permits == 0 then
      redis.call('LPUSH', key, '1')
    end
  elseif permits > 0 then
    redis.call('DEL', key)
  end
end

-- Make `raw` a queue's bound, named from now on (its :pressure:bound_unset goes), and bring
-- :not_full (holding `permits` elements) in line with it for the `len` items queued and
-- delayed. The caller reads `len` and `permits` first: a wrong type fails before any write.
local function store_bound(bound_key, unset_key, not_full_key, raw, len, permits)
  redis.call('SET', bound_key, raw)
  redis.call('DEL', unset_key)
  keep_permit(not_full_key, len, tonumber(raw), permits)
end

-- Replace the list `key` by `entries`, in order, in one pass (changing a long list
-- element by element with LSET or LREM would be quadratic).
local function rewrite_list(key, entries)
  redis.call('DEL', key)
  for i = 1, #entries, 1000 do  -- unpack's limit is 8000 values
    redis.call('RPUSH', key, unpack(entries, i, math.min(i + 999, #entries)))
  end
end

-- Wake the consumer registered as the waiter, if any: unregister it, give its
-- consumer role back and leave the wake-up entry 's:' in its inbox.
local function wake_waiter(waiter_key, lease_key, consumer_free, inbox_prefix)
  local waiter = redis.call('GET', waiter_key)
  if not waiter then return end
  redis.call('DEL', waiter_key, lease_key)
  if redis.call('LLEN', consumer_free) == 0 then redis.call('LPUSH', consumer_free, '1') end
  redis.call('LPUSH', inbox_prefix .. waiter, 's:')
end

-- Tell the registered waiter `waiter` (the value of :pressure:waiter, or false), if
-- `lease` (the value of :pressure:lease) still names it, that items are queued: the
-- wake-up entry 's:' in its inbox (one is enough). It stays the waiter, holding the
-- consumer role: its BLMOVE returns, and the get.lua 'woken' it sent behind the BLMOVE
-- takes the next item for it (a wake-up that leaves it registered can only be this one).
-- Nothing ever leaves the list for a consumer that may not be there to take it.
local function nudge_waiter(waiter, lease, inbox_prefix)
  if not waiter or lease ~= waiter then return end
  local inbox = inbox_prefix .. waiter
  if redis.call('LLEN', inbox) == 0 then redis.call('LPUSH', inbox, 's:') end
end

-- Whether a queue is wholly gone: no :bound and none of the protocol lists
-- that a Delete removes last (a Delete in progress still has some of them).
local function queue_gone(bound, producer_free, consumer_free, not_full, closed)
  return redis.call('EXISTS', bound, producer_free, consumer_free, not_full, closed) == 0
end

-- Delete every log kept beside a queue (pressure/log.py): each group named in
-- the set `logs_key` has '<logs_key>:<group>' (a stream) with ':tail' and
-- ':committed' beside it. Returns how many keys were deleted.
local function forget_logs(logs_key)
  local deleted = 0
  for _, group in ipairs(redis.call('SMEMBERS', logs_key)) do
    local log = logs_key .. ':' .. group
    deleted = deleted + redis.call('DEL', log, log .. ':tail', log .. ':committed')
  end
  return deleted
end

-- Delete what pressure keeps beside a queue that is gone: every consumer's
-- inbox, in-flight and held lists (named in the consumers hash), the logs (named
-- in the logs set) and the fixed extension keys. A plain spec client's Delete cannot
-- know these keys; the next pressure client to create the name, or to find it gone,
-- removes them, so nothing of the old queue (an unacknowledged item, say) reaches a
-- new one. Returns how many keys were deleted.
local function forget_queue(consumers_key, inbox_prefix, inflight_prefix, held_prefix, logs_key,
                            extension_keys)
  local deleted = forget_logs(logs_key)
  for _, id in ipairs(redis.call('HKEYS', consumers_key)) do
    deleted = deleted + redis.call('DEL', inbox_prefix .. id, inflight_prefix .. id, held_prefix .. id)
  end
  for _, key in ipairs(extension_keys) do
    if string.sub(key, -6) == ':utube' then  -- the lists of items waiting behind a utube key
      for _, utube_key in ipairs(redis.call('HKEYS', key)) do
        deleted = deleted + redis.call('DEL', key .. ':' .. utube_key)
      end
    end
    deleted = deleted + redis.call('DEL', key)
  end
  return deleted
end

-- The server's time in ms.
local function now_ms()
  local now = redis.call('TIME')
  return now[1] * 1000 + math.floor(now[2] / 1000)
end

-- The same as text (digits), for an entry or a header: made from TIME's own text, not by
-- formatting a number. A Lua number passed to a command, or joined into text, goes through
-- printf, which costs more than many a command: the scripts pass constants as text ('0',
-- not 0; tests/test_scripts.py checks it).
local function now_ms_text()
  local now = redis.call('TIME')
  return now[1] .. string.sub('00000' .. now[2], -6, -4)
end

-- INCRBY `key` `n`, sent as INCR when n is 1 (no number to format: see now_ms_text); the
-- new value.
local function add(key, n)
  if n == 1 then return redis.call('INCR', key) end
  return redis.call('INCRBY', key, n)
end

-- Delayed items (put(..., delay=), release(delay=)) wait in the sorted set :pressure:delayed,
-- scored by their due time in ms, each member '<16-digit sequence><item>' (the item as the
-- queue stores it), so members due at the same ms keep the order they were put in.
local function delayed_member(seq_key, item)
  return string.format('%016d', redis.call('INCR', seq_key)) .. item
end

-- Move the items of `delayed_key` due by now into the queue with `push_all` (items_push_all),
-- due order first, at most 1000 per call and at most `room` (the room left under the bound;
-- < 0: no bound), so the list never exceeds the bound. Returns how many wait there still.
-- Called by every put and get that finds the sorted set (one EXISTS otherwise).
local function move_due(delayed_key, items_key, room, push_all)
  local limit = 1000
  if room >= 0 then limit = math.min(limit, room) end
  if limit > 0 then
    local due = redis.call('ZRANGEBYSCORE', delayed_key, '-inf', now_ms(), 'LIMIT', '0', limit)
    if #due > 0 then
      local items = {}
      for i, member in ipairs(due) do items[i] = string.sub(member, 17) end
      redis.call('ZREM', delayed_key, unpack(due))
      push_all(items_key, items)
    end
  end
  return redis.call('ZCARD', delayed_key)
end

-- Items put with a ttl, a ttr or a utube key (put(..., ttl=, ttr=, key=)) have a field in
-- the hash :pressure:meta under sha1(the item as stored) (items with identical bytes share
-- it, as they share a delivery count): '<expires at, ms>|<ttr, ms>|<d: dead-letter it when
-- it expires>|<key>', each part possibly empty. The field goes when the item does:
-- acknowledged, expired, deleted, dead-lettered, taken by a default-mode get, or logged
-- (a stream reader's log: get.lua 'log', log_append.lua).
local function meta_of(meta_key, item)
  local raw = redis.call('HGET', meta_key, redis.sha1hex(item))
  if not raw then return nil end
  local at, ttr, dead, key = string.match(raw, '^(%d*)|(%d*)|(%a*)|?(.*)$')
  if key == '' then key = nil end
  return {expires = tonumber(at), ttr = tonumber(ttr), dead = dead == 'd', key = key}
end

-- utube (put(..., key=)): the hash :pressure:utube counts, per key, its items in the queue
-- (the one current item: queued, delayed by a release, or taken; and those waiting behind
-- it in the list '<utube key name>:<key>', oldest at the right). Only the current item is
-- ever in the queue, so items of one key are taken one at a time, in order. When it is
-- done (acknowledged, dead-lettered, expired, deleted, taken by a default-mode get, or logged),
-- the next one of its key enters the queue at the tail (with `push_all`, items_push_all).
-- `m` is the item's meta_of.
local function utube_done(utube_key, m, items_key, push_all)
  if not m or not m.key then return end
  if redis.call('HINCRBY', utube_key, m.key, '-1') <= 0 then
    redis.call('HDEL', utube_key, m.key)
  else
    local nxt = redis.call('RPOP', utube_key .. ':' .. m.key)
    if nxt then push_all(items_key, {nxt}) end
  end
end

-- The lifecycle's keys beside `key`, one of the queue's '<base>:pressure:<suffix>' keys that
-- a script declares (:pressure:meta): '<base>:pressure:<other>'. ack.lua and the log's
-- scripts declare it and name the others from it, touched only when a lifecycle feature is
-- in use, so that a call that uses none sends no more key names (same hash slot: the base's
-- hash tag is in every one; put.lua and get.lua name every key from the base itself).
local function sibling_key(key, suffix, other)
  return string.sub(key, 1, -(#suffix + 1)) .. other
end

-- The item of an in-flight entry '<seq>:<deliveries>:<ms>:<item>' is done with (acknowledged,
-- or logged by log_append.lua): its ttl, ttr and utube key go from `meta` (:pressure:meta),
-- its key's next item comes in (with `push_all`, items_push_all), and the queue's waiter is
-- woken for it (keys named from `meta`, see sibling_key).
local function entry_done(meta, entry, push_all)
  local item = string.match(entry, '^[^:]*:[^:]*:[^:]*:(.*)$')
  if not item then return end
  local m = meta_of(meta, item)
  redis.call('HDEL', meta, redis.sha1hex(item))
  if m and m.key then
    utube_done(sibling_key(meta, 'meta', 'utube'), m, sibling_key(meta, ':pressure:meta', ''), push_all)
    nudge_waiter(redis.call('GET', sibling_key(meta, 'meta', 'waiter')),
                 redis.call('GET', sibling_key(meta, 'meta', 'lease')), sibling_key(meta, 'meta', 'inbox:'))
  end
end

-- A stream reader's log (pressure/spark/log.py; log_append.lua has its format): what an append
-- reads, before anything is written, so that a key of the wrong type fails the append without
-- a change. The log's tail (the number of its last item: at least the last it holds and the
-- last committed, '<log>:committed', in case its tail key was lost), or nil if the log (a
-- stream), its tail (a number) or the set `logs` do not fit; and the queue's producer
-- (:producer). An empty log is deleted: XADD refuses an id at or below the last one a
-- stream ever had, which an empty one no longer shows, and nothing above its committed
-- number ever left it.
local function log_reads(log, tail_key, logs, producer_key)
  local kind = redis.call('TYPE', logs)['ok']
  if kind ~= 'none' and kind ~= 'set' then return nil end
  local values = redis.call('MGET', tail_key, log .. ':committed')
  local tail = tonumber(read(tail_key, values[1]) or '0')
  local committed = tonumber(read(log .. ':committed', values[2]) or '0')
  if not tail or not committed then return nil end
  kind = redis.call('TYPE', log)['ok']
  if kind == 'stream' then
    local last = redis.call('XREVRANGE', log, '+', '-', 'COUNT', '1')[1]
    if last then
      tail = math.max(tail, tonumber(string.match(last[1], '^(%d+)')))
    else
      redis.call('DEL', log)
    end
  elseif kind ~= 'none' then
    return nil
  end
  return math.max(tail, committed), redis.call('GET', producer_key) or ''
end

-- Append `items` (as the queue stores them) to `log` as one chunk numbered on from `tail`
-- (read by log_reads): `seqs` and `counts` are each item's delivery number and deliveries,
-- `stamps` their taken-at ms as text, space-separated. Returns the log's new tail.
local function log_chunk(log, tail_key, tail, logs, group, producer, items, seqs, counts, stamps)
  local c = #items
  if c > 0 then
    local lengths = {}
    for i = 1, c do lengths[i] = #items[i] end
    tail = tail + c
    redis.call('XADD', log, tail .. '-0', 'n', c, 'l', table.concat(lengths, ' '), 's', table.concat(seqs, ' '),
               'd', table.concat(counts, ' '), 't', stamps, 'p', producer, 'i', table.concat(items))
  end
  redis.call('SET', tail_key, tail)
  redis.call('SADD', logs, group)
  return tail
end
