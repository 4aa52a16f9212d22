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
        deleted = deleted + redis.call('DEL', key .. ':' .. utube_key, key .. '_meta:' .. utube_key)
      end
    elseif string.sub(key, -13) == ':redeliveries' then  -- queued copies' states (copies_push)
      for _, digest in ipairs(redis.call('HKEYS', key)) do deleted = deleted + redis.call('DEL', key .. ':' .. digest) end
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

-- The items of a consumer's held batch as delivery entries, newest first (the order of an
-- in-flight list); none if `held` holds no batch. A get_many's batch ('h:<first seq>:<ms>:<deliveries>',
-- get.lua 'batch') holds its items newest first; a native get's ('n:<seq>:<ms>:', get.lua
-- flag 'N') oldest first, and its bytes, which no script has seen, are counted in
-- `consumed_bytes` here, where they are read.
local function held_entries(held, consumed_bytes)
  local kind, first, ms, counts = string.match(redis.call('LINDEX', held, '0') or '', '^([hn]):([^:]*):([^:]*):(.*)$')
  if not first then return {} end
  local deliveries = {}
  for count in string.gmatch(counts, '[^,]+') do deliveries[#deliveries + 1] = count end
  local items = redis.call('LRANGE', held, '1', '-1')
  local entries, bytes = {}, 0
  for j, item in ipairs(items) do
    local i = #items - j + 1
    if kind == 'n' then
      i = j
      bytes = bytes + #item
    end
    entries[#items - i + 1] = (first + i - 1) .. ':' .. (deliveries[i] or 1) .. ':' .. ms .. ':' .. item
  end
  if bytes > 0 then redis.call('INCRBY', consumed_bytes, bytes) end
  return entries
end

-- Count in `consumed_bytes` the bytes of the native get's batch in `held` (see held_entries), if
-- it holds one: it is about to be dropped, its items in the consumer's hands.
local function count_native(held, consumed_bytes)
  if string.sub(redis.call('LINDEX', held, '0') or '', 1, 2) ~= 'n:' then return end
  local bytes = 0
  for _, item in ipairs(redis.call('LRANGE', held, '1', '-1')) do bytes = bytes + #item end
  if bytes > 0 then redis.call('INCRBY', consumed_bytes, bytes) end
end

-- INCRBY `key` `n`, sent as INCR when n is 1 (no number to format: see now_ms_text); the
-- new value.
local function add(key, n)
  if n == 1 then return redis.call('INCR', key) end
  return redis.call('INCRBY', key, n)
end

-- Counting toward join() (docs: reliability.md, "Counting rules"): an item counts once,
-- when its processing ends:
-- acknowledged (ack, task_done, the Executor's settle), counted by a default-mode task_done()
-- (its get handed it over), deleted, expired, dead-lettered (buried, delivered max_deliveries
-- times, unreadable or forged) or discarded. An item that comes back (released, requeued from a
-- dead consumer or past its visibility timeout) does not count; a dead letter kicked back has
-- its count undone (tasks_back). Unfinished tasks are :stats:produced_messages less
-- :pressure:tasks_done, never below 0: the one definition (join_check.lua, stats.lua, ack.lua).
local function unfinished_of(produced, done)
  return math.max(produced - done, 0)
end

-- `n` items' processing ended (see unfinished_of), with `produced` and `done` the values of
-- :stats:produced_messages and `tasks_done` already read: `tasks_done` goes up by n, never
-- past `produced`, and join() is woken (`all_tasks_done`) when none are left. Returns the
-- unfinished tasks left.
local function count_ended(tasks_done, all_tasks_done, produced, done, n)
  local counted = math.min(n, unfinished_of(produced, done))
  if counted > 0 then
    done = add(tasks_done, counted)
    if done >= produced then
      redis.call('XADD', all_tasks_done, 'MAXLEN', '1', '*', 'done', done)
    end
  end
  return unfinished_of(produced, done)
end

-- count_ended, the counters read here.
local function tasks_ended(produced_messages, tasks_done, all_tasks_done, n)
  return count_ended(tasks_done, all_tasks_done, counter(produced_messages), counter(tasks_done), n)
end

-- `n` dead letters are back in the queue (kick): their count toward join() is undone.
local function tasks_back(tasks_done, n)
  local back = math.min(n, counter(tasks_done))
  if back > 0 then redis.call('DECRBY', tasks_done, back) end
end

-- The items the queue's consumers hold (taken, in flight: delivered and not yet settled),
-- the one definition every view counts by (stats.lua: statistics(), the CLI, the metrics):
-- the entries of each registered consumer's in-flight list and inbox, wake-up entries 's:'
-- left out (they hold nothing), and the items of its held batch (its header left out).
-- Returns that count, and how many consumers are registered.
local function items_held(consumers, inbox_prefix, inflight_prefix, held_prefix)
  local taken = 0
  local ids = redis.call('HKEYS', consumers)
  for _, id in ipairs(ids) do
    for _, key in ipairs({inbox_prefix .. id, inflight_prefix .. id}) do
      local n = redis.call('LLEN', key)
      if n > 0 then taken = taken + n - #redis.call('LPOS', key, 's:', 'COUNT', '0') end
    end
    local held = redis.call('LLEN', held_prefix .. id)
    if held > 0 then taken = taken + held - 1 end  -- its header, then the items
  end
  return taken, #ids
end

-- Delayed items (put(..., delay=), release(delay=)) wait in the sorted set :pressure:delayed,
-- scored by their due time in ms, each member '<16-digit sequence><item>' (the item as the
-- queue stores it), so members due at the same ms keep the order they were put in.
local function delayed_member(seq_key, item)
  return string.format('%016d', redis.call('INCR', seq_key)) .. item
end

-- Every copy of an item keeps a state of its own while it has one: its delivery count once given
-- back, its ttl, ttr and utube key if put with them (put(..., ttl=, ttr=, key=)), as
-- '<deliveries so far>|<expires at, ms>|<ttr, ms>|<d: dead-letter it when it expires>|<key>',
-- each part possibly empty. Where it is kept follows the copy:
--   queued: under sha1(the item as stored) in <copies> (:pressure:redeliveries; copies_push),
--     one state per copy that has one, in the order those copies leave the queue: a copy given
--     back or kicked goes in first, as it enters the queue's head; one put, come due or let in
--     by its utube key last, as it enters the tail; a get takes the first for the copy it takes
--     (copies_take). Queued copies with identical bytes cannot be told apart in the list (a
--     spec client reads bare payloads), so a copy without a state, put ahead of one put with
--     a state, takes that state and leaves the other none; no state is ever shared or lost.
--   taken: the field 'd<delivery number>' of :pressure:meta, without its count (the delivery
--     entry has that), only when it has a ttl, ttr or key.
--   delayed: the field 'z<the member's 16-digit sequence>' of :pressure:meta.
--   waiting behind its utube key: the list '<:pressure:utube>_meta:<key>', beside the items
--     '<:pressure:utube>:<key>', in the same order.
-- A state goes when its copy does: acknowledged, expired, deleted, dead-lettered (a kicked
-- copy starts afresh), taken by a default-mode get, logged, or discarded.
local function state_of(raw)
  if not raw then return nil end
  local count, at, ttr, dead, key = string.match(raw, '^(%d*)|(%d*)|(%d*)|(%a*)|(.*)$')
  if not count then return nil end
  if key == '' then key = nil end
  return {count = tonumber(count) or 0, expires = tonumber(at), ttr = tonumber(ttr), dead = dead == 'd',
          key = key, meta = string.sub(raw, #count + 1)}
end

-- A state with no ttl, ttr or key: what is left without them ('|' and the four empty parts).
local NO_META = '||||'

-- Keep `state` for a copy of `item` (as stored) that enters the queue: at the head (`front`) or
-- the tail. The field of <copies> holds the state itself while it is its item's only one, else
-- '#<how many>' with the states in the list '<copies>:<sha1>' (a key per item only when
-- identical copies wait with states).
local function copies_push(copies, item, state, front)
  local digest = redis.sha1hex(item)
  local have = redis.call('HGET', copies, digest)
  if not have then
    redis.call('HSET', copies, digest, state)
    return
  end
  local list, n = copies .. ':' .. digest, tonumber(string.match(have, '^#(%d+)$'))
  if not n then  -- its only state so far: into the list
    n = 1
    redis.call('RPUSH', list, have)
  end
  if front then
    redis.call('LPUSH', list, state)
  else
    redis.call('RPUSH', list, state)
  end
  redis.call('HSET', copies, digest, '#' .. (n + 1))
end

-- The state (state_of) of the copy of the item whose sha1 is `digest` that leaves the queue
-- now, or nil: taken out of <copies>.
local function copies_take(copies, digest)
  local have = redis.call('HGET', copies, digest)
  if not have then return nil end
  local n = tonumber(string.match(have, '^#(%d+)$'))
  if not n then
    redis.call('HDEL', copies, digest)
    return state_of(have)
  end
  local list = copies .. ':' .. digest
  local raw = redis.call('LPOP', list)
  if n > 2 then
    redis.call('HSET', copies, digest, '#' .. (n - 1))
  else  -- one left: back in the field
    local last = redis.call('LPOP', list)
    if last then redis.call('HSET', copies, digest, last) else redis.call('HDEL', copies, digest) end
  end
  return state_of(raw)
end

-- How many queued copies have a state of their own (`len`: how many copies are queued): every
-- state kept, each of identical copies' too, at most `len` (a spec client's take leaves its
-- copy's state to the next one until a get finds or leaves the queue empty: none counts then).
local function copies_count(copies, len)
  if len == 0 then return 0 end
  local n = 0
  local flat = redis.call('HGETALL', copies)
  for i = 2, #flat, 2 do n = n + (tonumber(string.match(flat[i], '^#(%d+)$')) or 1) end
  return math.min(n, len)
end

-- Drop every queued copy's state (the queue's list is gone or emptied); returns how many
-- keys were deleted.
local function copies_forget(copies)
  local deleted = 0
  for _, digest in ipairs(redis.call('HKEYS', copies)) do deleted = deleted + redis.call('DEL', copies .. ':' .. digest) end
  return deleted + redis.call('DEL', copies)
end

-- How many members of the sorted set `key` (holding `card`) score at most `score`: ZCOUNT's
-- answer, found by a binary search over ranks with ZRANGE (O(log^2 n)), a command the docs'
-- ACL rule names (a user set up by it has no ZCOUNT).
local function count_upto(key, card, score)
  local low, high = 0, card
  while low < high do
    local mid = math.floor((low + high) / 2)
    if tonumber(redis.call('ZRANGE', key, mid, mid, 'WITHSCORES')[2]) <= score then
      low = mid + 1
    else
      high = mid
    end
  end
  return low
end

-- The queue's items as the gets would find them now, counted without changing anything: the one
-- definition of qsize(), empty(), full() (info.lua) and statistics() (stats.lua). A get moves the
-- delayed items due into the queue (move_due), drops those past their ttl as it reaches them
-- (get.lua expire), and an item of a utube key dropped so lets the next of its key in (utube_done),
-- which it reaches in turn. Returns:
--   ready   - what the gets hand out: the items queued and the delayed ones due, less those past
--             their ttl, plus for each utube item past its ttl the first of its key behind it that
--             is not. Counted up to `most` (nil: all), then the count stops (empty() asks for 1)
--   delayed - the delayed items not due yet
--   expired - the items past their ttl not dropped yet, that the gets drop on the way (those
--             seen, when the count stopped at `most`)
--   held    - what the bound holds, as put.lua counts it: the items queued (those past their ttl
--             too, until a get drops them) and every delayed one
--   stated  - the due items with a state of their own (in :pressure:meta until a put or get moves
--             them in; then copies_count counts them), past their ttl or not; counted in full only
--             when `most` is nil
-- Only the items that may have a ttl are read, each once: the queued ones if a queued copy's
-- state (:pressure:redeliveries, copies_push) has one, the due ones if :pressure:meta holds
-- states; else O(log n) and O(states). `len_of` and `range_of` are the kind's items_len and
-- items_range.
local function queue_counts(items_key, delayed_key, meta_key, utube_key, most, len_of, range_of)
  local len = len_of(items_key)
  local delayed = redis.call('ZCARD', delayed_key)
  local now = now_ms()
  local due = 0
  if delayed > 0 then due = count_upto(delayed_key, delayed, now) end
  local ready, expired, stated = len + due, 0, 0
  local function counted() return ready, delayed - due, expired, len + delayed, stated end
  if ready == 0 then return counted() end
  -- the queued copies' states by sha1: the k-th copy of an item out next takes the k-th
  local copies = string.sub(meta_key, 1, -5) .. 'redeliveries'
  local states = {}
  local queued_ttl = false
  if len > 0 then
    local flat = redis.call('HGETALL', copies)
    for i = 1, #flat, 2 do
      local list, n = {flat[i + 1]}, tonumber(string.match(flat[i + 1], '^#(%d+)$'))
      if n then list = redis.call('LRANGE', copies .. ':' .. flat[i], '0', '-1') end
      states[flat[i]] = list
      for _, raw in ipairs(list) do
        local m = state_of(raw)
        if m and m.expires then queued_ttl = true end
      end
    end
  end
  local due_ttl = due > 0 and redis.call('EXISTS', meta_key) == 1
  if not queued_ttl and not due_ttl then return counted() end
  ready = 0
  local taken_of, walked = {}, {}
  local function gone(m) return m and m.expires and m.expires <= now end
  -- Count an item the gets reach, whose state is `m`; true once `most` are ready.
  local function reach(m)
    if not gone(m) then
      ready = ready + 1
      return most ~= nil and ready >= most
    end
    expired = expired + 1
    if not m.key or walked[m.key] then return false end
    walked[m.key] = true  -- the next of its key comes in: its items wait oldest at the right
    local behind, behind_states = utube_key .. ':' .. m.key, utube_key .. '_meta:' .. m.key
    local first, waiting = 0, redis.call('LLEN', behind)
    while first < waiting do
      local raws = redis.call('LRANGE', behind_states, -(first + 100), -(first + 1))
      local n = math.min(100, waiting - first)
      for i = n, 1, -1 do
        if not gone(state_of(raws[#raws - n + i])) then
          ready = ready + 1
          return most ~= nil and ready >= most
        end
        expired = expired + 1
      end
      first = first + 100
    end
    return false
  end
  -- the queued items, next out first, then the due ones, in chunks growing from 16 (empty()
  -- mostly stops at the first)
  local first, chunk = 0, 16
  while queued_ttl and first < len do
    local last = math.min(first + chunk, len) - 1
    for _, item in ipairs(range_of(items_key, first, last)) do
      local digest = redis.sha1hex(item)
      local k = (taken_of[digest] or 0) + 1
      taken_of[digest] = k
      if reach(state_of((states[digest] or {})[k])) then return counted() end
    end
    first, chunk = last + 1, math.min(chunk * 2, 1024)
  end
  if not queued_ttl then ready = len end
  if most ~= nil and ready >= most then return counted() end
  first, chunk = 0, 16
  while first < due do
    local last = math.min(first + chunk, due) - 1
    for _, member in ipairs(redis.call('ZRANGE', delayed_key, first, last)) do
      local m
      if due_ttl then m = state_of(redis.call('HGET', meta_key, 'z' .. string.sub(member, 1, 16))) end
      if m then stated = stated + 1 end
      if reach(m) then return counted() end
    end
    first, chunk = last + 1, math.min(chunk * 2, 1024)
  end
  return counted()
end

-- The lifecycle's keys beside `key`, one of the queue's '<base>:pressure:<suffix>' keys that
-- a script declares (:pressure:meta): '<base>:pressure:<other>'. ack.lua and the log's
-- scripts declare it and name the others from it, touched only when a lifecycle feature is
-- in use, so that a call that uses none sends no more key names (same hash slot: the base's
-- hash tag is in every one; put.lua and get.lua name every key from the base itself).
local function sibling_key(key, suffix, other)
  return string.sub(key, 1, -(#suffix + 1)) .. other
end

-- The held list of the consumer whose in-flight list is `inflight` ('<base>:pressure:inflight:<id>':
-- the last such segment, as no consumer id holds one), and the queue's :stats:consumed_bytes.
local function held_of(inflight)
  local base, id = string.match(inflight, '^(.*):pressure:inflight:(.*)$')
  return base .. ':pressure:held:' .. id, base .. ':stats:consumed_bytes'
end

-- Whether `held` holds native delivery `delivery` ('*': any), a reliable get's batch of one
-- (get.lua flag 'N'); if so it leaves its consumer's hands, acknowledged: its bytes counted,
-- `size` if the caller knows them (else read: count_native), the list gone.
local function take_native(held, delivery, consumed_bytes, size)
  local first = string.match(redis.call('LINDEX', held, '0') or '', '^n:([^:]*):')
  if not first or (delivery ~= '*' and first ~= delivery) then return false end
  if size and size ~= '' then
    redis.call('INCRBY', consumed_bytes, size)
  else
    count_native(held, consumed_bytes)
  end
  redis.call('DEL', held)
  return true
end

-- Move the items of `delayed_key` due by now into the queue with `push_all` (items_push_all),
-- due order first, at most 1000 per call and at most `room` (the room left under the bound,
-- 0 if none is left; false: no bound), so the list never exceeds the bound, their states (in
-- :pressure:meta, named from `delayed_key`) with them. Returns how many wait there still, and
-- how many of them are due, kept out by the bound (0 unless `room` stopped it).
-- Called by every put and get that finds the sorted set (one EXISTS otherwise).
local function move_due(delayed_key, items_key, room, push_all)
  local limit = 1000
  if room then limit = math.min(limit, math.max(room, 0)) end
  local moved = 0
  if limit > 0 then
    local due = redis.call('ZRANGEBYSCORE', delayed_key, '-inf', now_ms(), 'LIMIT', '0', limit)
    if #due > 0 then
      local meta = sibling_key(delayed_key, 'delayed', 'meta')
      local stated = redis.call('EXISTS', meta) == 1
      local items = {}
      for i, member in ipairs(due) do
        items[i] = string.sub(member, 17)
        if stated then
          local field = 'z' .. string.sub(member, 1, 16)
          local state = redis.call('HGET', meta, field)
          if state then
            redis.call('HDEL', meta, field)
            copies_push(sibling_key(delayed_key, 'delayed', 'redeliveries'), items[i], state, false)
          end
        end
      end
      redis.call('ZREM', delayed_key, unpack(due))
      push_all(items_key, items)
      moved = #due
    end
  end
  local waiting, kept_out = redis.call('ZCARD', delayed_key), 0
  if room and moved == limit and limit < 1000 and waiting > 0 then
    kept_out = count_upto(delayed_key, waiting, now_ms())
  end
  return waiting, kept_out
end

-- utube (put(..., key=)): the hash :pressure:utube counts, per key, its items in the queue
-- (the one current item: queued, delayed by a release, or taken; and those waiting behind
-- it in the list '<utube key name>:<key>', oldest at the right, their states beside it in
-- '<utube key name>_meta:<key>'). Only the current item is ever in the queue, so items of one
-- key are taken one at a time, in order. When it is done (acknowledged, dead-lettered, expired,
-- deleted, taken by a default-mode get, or logged), the next one of its key enters the queue
-- at the tail (with `push_all`, items_push_all; `len_of`, items_len, says how many are queued),
-- its state with it, behind the delayed items due by then. `m` is the item's state
-- (state_of). Waiting behind its key, an item counts neither in the length nor against the
-- bound; let in, it is a queued item and counts in both (past the bound, if the queue filled
-- meanwhile, as an item given back does: it was accepted when put), so :not_full is brought in
-- line here, for every caller (keys named from `items_key`, and `utube_key`: sibling_key). A
-- caller that read :not_full's length before must read it again.
local function utube_done(utube_key, m, items_key, push_all, len_of)
  if not m or not m.key then return end
  if redis.call('HINCRBY', utube_key, m.key, '-1') <= 0 then
    redis.call('HDEL', utube_key, m.key)
  else
    local nxt = redis.call('RPOP', utube_key .. ':' .. m.key)
    if nxt then
      local bound = bound_of(redis.call('GET', items_key .. ':bound'))
      local delayed = sibling_key(utube_key, 'utube', 'delayed')
      -- what fell due entered the queue then, ahead of this item: it moves in first (as far as
      -- the bound allows), as a put or a get would have moved it (move_due)
      if redis.call('EXISTS', delayed) == 1 then
        local room = false
        if bound and bound > 0 then room = bound - len_of(items_key) end
        move_due(delayed, items_key, room, push_all)
      end
      -- (an item that waits with no state beside it still has its key)
      local state = redis.call('RPOP', utube_key .. '_meta:' .. m.key) or (NO_META .. m.key)
      copies_push(sibling_key(utube_key, 'utube', 'redeliveries'), nxt, state, false)
      local len = push_all(items_key, {nxt})
      if bound then  -- (no queue, or a bad bound: :not_full is left to the client's error)
        local not_full = items_key .. ':not_full'
        keep_permit(not_full, len + redis.call('ZCARD', delayed), bound, redis.call('LLEN', not_full))
      end
    end
  end
end

-- The copy of an in-flight entry '<seq>:<deliveries>:<ms>:<item>' is done with (acknowledged,
-- or logged by log_append.lua): its state goes from `meta` (:pressure:meta, field
-- 'd<seq>'), its key's next item comes in (with `push_all` and `len_of`: utube_done), and the queue's
-- waiter is woken for it (keys named from `meta`, see sibling_key).
local function entry_done(meta, entry, push_all, len_of)
  local seq = string.match(entry, '^([^:]*):')
  if not seq then return end
  local m = state_of(redis.call('HGET', meta, 'd' .. seq))
  if not m then return end
  redis.call('HDEL', meta, 'd' .. seq)
  if m.key then
    utube_done(sibling_key(meta, 'meta', 'utube'), m, sibling_key(meta, ':pressure:meta', ''), push_all,
               len_of)
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
