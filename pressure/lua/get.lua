-- Get one item (protocol Get), or register as the consumer waiting for one.
-- Items reach a consumer as entries '<seq>:<deliveries>:<ms>:<payload>' (a
-- delivery number, how many times the item has been delivered, the delivery
-- time in ms, and the payload). A blocking caller sends this script ('block'),
-- BLMOVE <inbox> <inflight> RIGHT LEFT and this script again ('woken') in one
-- pipeline: if an item is queued, 'block' puts its entry in the caller's private
-- inbox and the BLMOVE moves it at once; if not, the caller registers as the
-- waiter, holding the consumer role, and a put (or a requeue) leaves the wake-up
-- entry 's:' in its inbox without taking anything out of the list: the BLMOVE
-- returns, and 'woken', which runs right after it, takes the next item for the
-- caller (an item never leaves the list for a consumer that may not be there to
-- take it). Any other outcome leaves a wake-up 's:' in the inbox so the BLMOVE
-- answers at once. An entry stays in <inflight> until the consumer acknowledges it
-- (ack.lua), so a reply lost on a dropped connection loses nothing. In the
-- default mode (consumer record ending in '|d') the client removes what its
-- in-flight list and held batch hold as soon as it has the items in hand, before
-- get() returns (a DEL sent without waiting for its reply); a consumer's next get
-- also drops them, and the client takes back, before that, any entry it never
-- received (mode 'cancel'). What a dead consumer's lists still hold was never
-- returned by its get, and is requeued (requeue.lua).
-- Mode 'batch' (default mode only: get_many) keeps no entry per item: the
-- items go to the client as they are, with one header, and stay in Redis as
-- they are in the consumer's held list <held> (the header at its head, then
-- the items, newest first) until the client drops them, or 'cancel' turns
-- them into inbox entries if the client never received them. The header is
-- 'h:<first seq>:<ms>:<deliveries>', the items numbered from <first seq> on,
-- <deliveries> empty when every item is delivered for the first time, else
-- each item's count, comma-separated; the batch counts as received under the
-- delivery number 'h<first seq>'.
-- Flag 'N' ('nowait', 'woken' that turns into it, 'block' and 'batch'; 'K' is 'batch''s 'k' so):
-- the payloads move natively (in reliable mode, one at a time: a consumer's held list holds its one
-- native delivery until it is acknowledged, released or requeued, as the in-flight list holds the
-- others). The caller sends the script in a MULTI followed by
-- 'BLMOVE <gate> <held> RIGHT RIGHT 0.001' (one; for 'batch', as many as ARGV[7] asks for: in a
-- transaction BLMOVE never blocks) and 'RENAME <gate> <base>', then EXEC (<gate> is
-- <base>:pressure:gate). When the script takes FIFO items with no state (no delivery count,
-- ttl, ttr or utube key kept for them), it renames the items list to <gate> and leaves the header
-- 'n:<first seq>:<ms>:' in the empty held list; the BLMOVEs move the next items behind it, oldest
-- first, and return them ([header, items]: a held batch whose bytes no script has counted yet),
-- those past what it took finding the gate empty; the RENAME gives the list its name back. Its bytes are counted in :stats:consumed_bytes when the batch
-- is read in full (a 'cancel', a requeue, its drop by the next get) or by the client's 'drop'
-- (it knows the length). Otherwise the script answers as 'nowait' with 'n' (an entry it made, or a status), and no gate exists: the
-- BLMOVE finds nothing and the RENAME fails.
-- A closed queue is drained only when its list is empty, no delayed item waits, no other consumer
-- holds an item that may come back (in its inbox, in flight or in a held batch), and every utube
-- key left has its current item in this consumer's in-flight list (its own deliveries, and what
-- their settling lets in, never make it wait): until then a get answers -8, and waits like one
-- on an open, empty queue.
-- KEYS[1]  - the items (a list; a sorted set for LIFO and priority queues), whose name <base>
--            names every other key the script uses: <base> followed by a suffix (one hash
--            slot: the base's hash tag is in every one). A call sends one key name, not the
--            eighteen it uses (each costs the server more to receive and hand to Lua than
--            the script costs to make it):
--            :bound, :consumer_free, :consumer, :closed, :not_full, :stats:consumed_messages,
--            :stats:consumed_bytes,
--            :pressure:waiter (identifier of the waiting consumer),
--            :pressure:lease (the waiter's identifier, expiring unless renewed),
--            :pressure:consumers (hash: identifier -> 'host|pid|start|ms|mode', where ms is
--              the visibility timeout (reliable, mode 'r') or lease (default, mode 'd')),
--            :pressure:redeliveries and the lists named after it (the states of queued copies:
--              deliveries so far, ttl, ttr, utube key; lib.lua state_of, copies_take; dropped
--              when a get finds or leaves the queue empty: what a spec client took left them
--              behind),
--            :pressure:delivery_seq,
--            :pressure:delayed (delayed items by due time: those due move into the items
--              first, as far as the bound allows; see lib.lua move_due),
--            :pressure:meta (an item taken in reliable mode keeps its ttl, ttr and utube key
--              there, under 'd<delivery number>'; lib.lua state_of; due delayed items' states
--              come from there): an item taken past its ttl is dropped (or dead-lettered) and
--              the next one taken; only then are :pressure:counts ('expired'), :pressure:dead (expired
--              items put with 'd'), :pressure:tasks_done and :pressure:all_tasks_done (an
--              expired item counts as done, dropped or dead-lettered: lib.lua tasks_ended) and
--              :stats:produced_messages used; :pressure:utube with it (an item of a utube
--              key that expires, or that a default-mode get or a 'log' takes, lets its key's
--              next item in; lib.lua utube_done),
--            this consumer's inbox, in-flight list and held batch,
--              :pressure:inbox:<ARGV[1]>, :pressure:inflight:<ARGV[1]>, :pressure:held:<ARGV[1]>
--              (what comes before ARGV[1] is the prefix of every consumer's list of that kind),
--            and, in mode 'log', named from the group ARGV[8]: the log :pressure:logs:<group>
--              and its tail '<log>:tail' (see log_append.lua), the set :pressure:logs; and
--              :producer, read
-- ARGV[1] - consumer identifier: the client identifier and the handle's own
--           token ('<client id>#<token>'); it names the inbox, in-flight and held lists
-- ARGV[2] - 'nowait': move the entry to <inflight> and return it, never wait
--           'many': the same for up to ARGV[7] entries, returned as an array
--           'batch': up to ARGV[7] items, as 'many' in reliable mode; in the
--                    default mode held as they are in <held>, returned as they
--                    are and then the header (see above)
--           'block': deliver to the inbox, or register as the waiter
--           'woken': sent behind the BLMOVE of 'block': if that BLMOVE took a
--                    wake-up, removes it from <inflight>, and if the caller is still the
--                    waiter (a put or a requeue woke it), as 'nowait'; else nothing (-5)
--           'cancel': stop waiting; entries in <inflight> and a batch in
--                     <held> not named in ARGV[7..] (never received) go back to
--                     the inbox
--           'drop': (the default mode's drop of what a get returned, for a native get) the
--                   held batch ARGV[3] counts ARGV[7] bytes in :stats:consumed_bytes if it is
--                   still there, then the in-flight and held lists go
--           'log': up to ARGV[7] items straight into the log of group ARGV[8], as one
--                  chunk (log_append.lua's format): no entry, nothing in <inflight>, the
--                  items leave the queue's care as a default-mode get's do (their ttl,
--                  ttr and utube key go; pressure/spark/log.py). Not when entries wait
--                  in the inbox (-9: the caller takes those with 'many')
-- ARGV[3] - '0', or
--           '1' ('block') the caller asked to block with a negative timeout
--           'w' ('block') the caller has taken back what dead consumers held: on a
--               closed, empty queue whose items others hold, wait instead of -8
--           'k' ('batch') keep what <inflight> holds (the same get_many's first
--               item, not returned yet)
--           'n' ('nowait') a blocking get's first try: the entry comes with how many
--               items are still queued (1 for one from the inbox: maybe more)
--           'N' ('nowait', 'woken') the same, moving the payload natively where it can (see
--               above): then the answer is {seq, 1, ms, items still queued}; ('block') '0' so,
--               with the same answer (and a wake-up in the inbox: its BLMOVE answers at once)
--           'N', 'K' ('batch') moving the payloads natively where it can, 'K' as 'k': then the
--               answer is {first seq, how many, ms, items still queued}
--           ('drop') the number of the native batch the client has in hand ('<seq>')
-- ARGV[4] - consumer record 'host|pid|start|ms|mode' for :pressure:consumers
-- ARGV[5] - lease in ms for the waiter
-- ARGV[6] - client identifier, written to :consumer as the protocol requires
-- ARGV[7..] - ('cancel') delivery numbers the client has received and not acknowledged;
--             ('many', 'batch') how many items at most; ('log') how many at most, then
--             the group; ('many') optionally then a share k >= 1: of the items queued now,
--             at most ceil(queued / k) (a worker of an executor with k workers alive takes
--             no more than its share: pressure/executor/worker.py)
-- return
--   'nowait': the entry ({the entry, items still queued} with 'n' and 'N'; {seq, deliveries,
--             ms, items still queued} when 'N' moved it natively), or -2 (role held by another client while items
--             wait), -3 (closed and empty), -4 (no queue), -5 (empty), -8 (closed
--             and empty, but another consumer holds items that may come back)
--   'many':   an array of 1 or more entries (those waiting in the inbox, if any, else
--             items from the queue), or the same negative codes
--   'batch':  the same as 'many' in reliable mode, and for entries waiting in the inbox;
--             else an array of 1 or more items followed by the header
--   'woken':  as 'nowait', or -5 when it had nothing to do
--   'drop':   1
--   'cancel': 1 if an item entry waits in the inbox, else -5
--   'log':    {the log's tail, how many it logged (>= 1), then the delivery number and
--             deliveries of each of them delivered before}, or the negative codes of
--             'nowait', or -9 (entries wait in the inbox)
--   'block':  1 (an entry is in the inbox), 2 (the same, and more items are queued), as
--             'nowait' with 'N' when it moved the item natively,
--             -6 (registered as the waiter),
--             -2 (role held by another client), -3, -4, -7 (negative timeout), -8
local items_key = KEYS[1]
local me, mode, flag = ARGV[1], ARGV[2], ARGV[3]
local record, lease_ms, client_id = ARGV[4], ARGV[5], ARGV[6]
local ext = items_key .. ':pressure:'
local inflight = ext .. 'inflight:' .. me
local held = ext .. 'held:' .. me
local consumed_bytes = items_key .. ':stats:consumed_bytes'
if mode == 'drop' then
  local first = string.match(redis.call('LINDEX', held, '0') or '', '^n:([^:]*):')
  if first and first == flag then redis.call('INCRBY', consumed_bytes, ARGV[7]) end
  redis.call('DEL', inflight, held)
  return 1
end
-- 'woken': the BLMOVE just before us moved what it took to the head of <inflight>
if mode == 'woken' and redis.call('LINDEX', inflight, '0') ~= 's:' then return -5 end
-- (the library's definitions: 'drop', and 'woken' with nothing to do, return before them)
local native = flag == 'N' or flag == 'K'
if flag == 'N' then flag = 'n' elseif flag == 'K' then flag = 'k' end
local bound_key, consumer_free = items_key .. ':bound', items_key .. ':consumer_free'
local consumer, closed, not_full = items_key .. ':consumer', items_key .. ':closed', items_key .. ':not_full'
local consumed_messages = items_key .. ':stats:consumed_messages'
local waiter_key, consumers, redeliveries = ext .. 'waiter', ext .. 'consumers', ext .. 'redeliveries'
local delivery_seq, delayed, meta = ext .. 'delivery_seq', ext .. 'delayed', ext .. 'meta'
local inbox = ext .. 'inbox:' .. me
local default_mode = string.sub(record, -2) == '|d'
if mode == 'batch' and not default_mode then mode = 'many' end
-- what is taken leaves the queue's care at once: a default-mode get's items, and a 'log''s
local settles = default_mode or mode == 'log'
-- only a client holding the role can be the registered waiter
local role_free = redis.call('LLEN', consumer_free) > 0
-- the string keys in one MGET (lib.lua read: a false value is read again with GET)
local values = redis.call('MGET', bound_key, waiter_key, consumer)
local registered = not role_free and read(waiter_key, values[2]) == me
if mode == 'woken' then
  -- the wake-up is used up, whatever follows: left in <inflight>, it would read as an item
  -- held (a consumer that stops here, woken to end its wait, never takes it out)
  redis.call('LPOP', inflight)
  if not registered then return -5 end
  mode = 'nowait'
end
local nowait = mode == 'nowait' or mode == 'many' or mode == 'batch' or mode == 'log'

local function stop_waiting()
  if registered then
    -- registered: :consumer_free was empty above, and only this gives its token back
    redis.call('DEL', waiter_key)
    redis.call('LPUSH', consumer_free, '1')
    registered = false
  end
end

local function wake(code)
  stop_waiting()
  redis.call('LPUSH', inbox, 's:')
  return code
end

-- hand the oldest inbox entry over: in-flight until acknowledged
local function take_from_inbox()
  while true do
    local entry = redis.call('RPOP', inbox)
    if not entry then return false end
    if string.sub(entry, 1, 2) ~= 's:' then
      redis.call('LPUSH', inflight, entry)
      return entry
    end
  end
end

if mode == 'cancel' then
  stop_waiting()
  local received = {}
  for i = 7, #ARGV do received[ARGV[i]] = true end
  local entries = redis.call('LRANGE', inflight, '0', '-1')
  for _, entry in ipairs(entries) do  -- newest first: the oldest ends up next out
    local seq = string.match(entry, '^([^:]*):')
    if seq == 's' or not received[seq] then
      redis.call('LREM', inflight, '1', entry)
      if seq ~= 's' then redis.call('RPUSH', inbox, entry) end
    end
  end
  -- (a batch is received as 'h<first>'; a reliable consumer's native delivery by its number)
  local first = string.match(redis.call('LINDEX', held, '0') or '', '^[hn]:([^:]*):')
  if first and not (received['h' .. first] or received[first]) then
    -- newest first: the oldest ends up next out
    for _, entry in ipairs(held_entries(held, consumed_bytes)) do redis.call('RPUSH', inbox, entry) end
    redis.call('DEL', held)
  end
  redis.call('LREM', inbox, '0', 's:')
  if redis.call('LLEN', inbox) > 0 then return 1 end
  return -5
end
-- One look at the keys that are usually not there (lists empty, no lifecycle feature in use,
-- open queue): `present` of them existed; none, and the commands that would find them empty
-- are skipped. look(key) says whether one did, each asked once, before this script changes it.
local present = redis.call('EXISTS', inflight, held, inbox, delayed, redeliveries, closed)
local function look(key)
  if present == 0 or redis.call('EXISTS', key) == 0 then return false end
  present = present - 1
  return true
end
if default_mode then
  -- returned by the last get: acknowledged by this next one (the client drops them as
  -- soon as it has them; this is for a drop that never arrived). With 'k' the in-flight
  -- list holds the first item of the get_many this batch is for, not returned yet.
  if present == 0 then  -- nothing to drop
  else
    count_native(held, consumed_bytes)  -- a native get's batch whose drop never arrived
    if flag == 'k' then present = present - redis.call('DEL', held)
    else present = present - redis.call('DEL', inflight, held) end
  end
elseif look(inflight) then
  redis.call('LREM', inflight, '0', 's:')  -- wake-ups moved there by BLMOVE
end
-- entries delivered to us earlier (e.g. before a reply was lost) come first
local in_inbox = look(inbox)
if mode == 'log' and in_inbox then
  redis.call('LREM', inbox, '0', 's:')
  if redis.call('LLEN', inbox) > 0 then return -9 end
  in_inbox = false
end
if nowait then
  local entry = in_inbox and take_from_inbox()
  if entry and mode == 'nowait' then
    if flag == 'n' then return {entry, 1} end
    return entry
  end
  if entry then
    local entries = {entry}
    for _ = 2, math.min(tonumber(ARGV[7]) or 1, 1000) do
      entry = take_from_inbox()
      if not entry then break end
      entries[#entries + 1] = entry
    end
    return entries
  end
elseif in_inbox then
  -- wake-ups still there are stale: this script looks at the queue itself
  redis.call('LREM', inbox, '0', 's:')
  if redis.call('LLEN', inbox) > 0 then return 1 end
end
local raw = read(bound_key, values[1])
if not raw then
  if nowait then return -4 end
  return wake(-4)
end
local bound = bound_of(raw)
if not bound then
  return redis.error_reply('PRESSURE bad bound ' .. raw .. ' at ' .. bound_key)
end
local len = items_len(items_key)
local permits = redis.call('LLEN', not_full)  -- read before any write: a wrong type changes nothing
local waiting = 0  -- delayed items
local kept_out = 0  -- of them, due ones the bound kept out of the list (take_live takes them in turn)
local has_state = look(redeliveries)
if look(delayed) then
  local room = false
  if bound > 0 then room = bound - len end
  waiting, kept_out = move_due(delayed, items_key, room, items_push_all)
  len = items_len(items_key)
  has_state = has_state or redis.call('EXISTS', redeliveries) == 1
end
if len == 0 and has_state then
  -- no copy is queued: what states are left are those of copies a spec client took
  copies_forget(redeliveries)
  has_state = false
end

-- the record before any answer that leaves a wake-up entry in our lists: a Delete
-- finds a consumer's lists only through its record, and a sweep drops the records of
-- consumers whose lists are gone (a closed queue's last get must not leave one behind)
if redis.call('HGET', consumers, me) ~= record then redis.call('HSET', consumers, me, record) end
-- The answer to a get on a closed queue with nothing queued: -3 (drained: ShutDown) unless an
-- item may still come back, else -8 (the caller takes back what dead consumers hold, then
-- waits); nil for a blocking call with flag 'w', which waits as on an open, empty queue.
-- (What it uses comes as arguments: a closure of upvalues costs every call that makes it,
-- some thousands of instructions, and nearly every call makes it for nothing.)
local function closed_status(nowait, flag, waiting, wake, state_of, ext, consumers, me, inflight, meta)
  -- Whether a list holds anything but wake-up entries.
  local function has_entries(key)
    local n = redis.call('LLEN', key)
    return n > 0 and n > #redis.call('LPOS', key, 's:', 'COUNT', '0')
  end

  -- Whether another consumer holds an item that may come back to the queue: in its inbox
  -- (never received), in flight (reliable: not acknowledged; default: not returned by its
  -- get yet) or in a held batch (default: not returned yet).
  local function others_hold()
    for _, id in ipairs(redis.call('HKEYS', consumers)) do
      if id ~= me and (redis.call('EXISTS', ext .. 'held:' .. id) == 1 or has_entries(ext .. 'inbox:' .. id)
                       or has_entries(ext .. 'inflight:' .. id)) then
        return true
      end
    end
    return false
  end

  -- Whether a utube key's current item (taken: none is queued or delayed here) is held by
  -- someone else: another consumer, or a spec client, which leaves no record. The items
  -- behind a key whose current item is in our own in-flight list come in when we settle it.
  local function others_keys()
    local keys = redis.call('HKEYS', ext .. 'utube')
    if #keys == 0 then return false end
    local mine = {}
    for _, entry in ipairs(redis.call('LRANGE', inflight, '0', '-1')) do
      local seq = string.match(entry, '^(%d+):')
      local s = seq and state_of(redis.call('HGET', meta, 'd' .. seq))
      if s and s.key then mine[s.key] = true end
    end
    for _, key in ipairs(keys) do
      if not mine[key] then return true end
    end
    return false
  end

  if waiting == 0 and not others_keys() and not others_hold() then
    if nowait then return -3 end
    return wake(-3)
  end
  -- not drained: what others hold may come back (the caller first takes back what dead
  -- consumers hold, then waits with 'w' as on an open, empty queue)
  if nowait then return -8 end
  if flag ~= 'w' then return wake(-8) end
  return nil
end
if len == 0 and look(closed) then
  local status = closed_status(nowait, flag, waiting, wake, state_of, ext, consumers, me, inflight, meta)
  if status then return status end
end
if flag == '1' then return wake(-7) end
if not registered and not role_free then
  if nowait then
    if len == 0 then return -5 end
    return -2
  end
  return wake(-2)
end
if read(consumer, values[3]) ~= client_id then redis.call('SET', consumer, client_id) end
-- 'log': the log's keys read before any item leaves the queue (a key of the wrong type fails
-- here, changing nothing)
local log, logs, log_tail, producer = nil, nil, nil, nil
if mode == 'log' and len > 0 then
  logs = ext .. 'logs'
  log = logs .. ':' .. ARGV[8]
  log_tail, producer = log_reads(log, log .. ':tail', logs, items_key .. ':producer')
  if not log_tail then return redis.error_reply('PRESSURE bad log ' .. log) end
end
local taken, states = nil, nil
-- How many of the `queued` items a 'many' or 'batch' takes: ARGV[7] at most (and 1000: unpack's
-- limit is 8000 values), and with a share ARGV[8] ('many') no more than ceil(queued / share).
local function wanted(queued)
  local n = tonumber(ARGV[7]) or 1
  if mode == 'many' and ARGV[8] then
    n = math.min(n, math.ceil(queued / math.max(1, tonumber(ARGV[8]) or 1)))
  end
  return math.max(1, math.min(n, queued, 1000))
end
-- (items with a state of their own, or due items the bound kept out, which a get_many that
-- empties the list takes in turn: take_live)
if len > 0 and (has_state or kept_out > 0) then
  -- (the functions of a branch are made in it: a closure costs every call that makes it)
  local utube = ext .. 'utube'
  -- Whether `item`, just taken out of the queue at `now` with its state `s`, is past its ttl:
  -- then it is dropped or moved to the dead letters (seq 'expired'), counted as done either way
  -- (lib.lua tasks_ended), and counted in :pressure:counts 'expired'; never handed out, it is not
  -- counted in :stats:consumed_* (nor taken out of them by a kick: kick.lua). A default-mode
  -- get (and a 'log') takes its state along: the item is never acknowledged.
  local function expire(item, s, now)
    if not s then return false end
    if not s.expires or s.expires > now then
      if settles then utube_done(utube, s, items_key, items_push_all, items_len) end
      return false
    end
    utube_done(utube, s, items_key, items_push_all, items_len)
    redis.call('HINCRBY', ext .. 'counts', 'expired', '1')
    if s.dead then
      redis.call('LPUSH', ext .. 'dead', 'expired:0:' .. now .. ':' .. item)
    end
    tasks_ended(items_key .. ':stats:produced_messages', ext .. 'tasks_done', ext .. 'all_tasks_done', 1)
    return true
  end

  -- Up to `want` live items out of the queue, and their states (false: none); those past
  -- their ttl are expired on the way. A queue emptied so has room for the due items the bound
  -- kept out above (move_due): they come in and are taken in turn, so that no get finds none
  -- while one is due.
  local function take_live(want, now)
    local kept, kept_states = {}, {}
    while #kept < want do
      local n = math.min(want - #kept, items_len(items_key))
      if n == 0 and waiting > 0 then
        local room = false
        if bound > 0 then room = bound end
        waiting = move_due(delayed, items_key, room, items_push_all)
        n = math.min(want - #kept, items_len(items_key))
      end
      if n == 0 then break end
      local items
      if n == 1 then items = {items_pop(items_key)} else items = items_pop_all(items_key, n) end
      for _, item in ipairs(items) do
        local s = copies_take(redeliveries, redis.sha1hex(item))
        if not expire(item, s, now) then
          kept[#kept + 1] = item
          kept_states[#kept] = s or false
        end
      end
    end
    return kept, kept_states
  end

  local want = 1
  if mode ~= 'nowait' then want = wanted(len + kept_out) end
  taken, states = take_live(want, now_ms())
  local left = items_len(items_key)
  -- none queued now: what states are left are those of copies a spec client took (as above)
  if left == 0 then copies_forget(redeliveries) end
  len = left + #taken
  -- an item let in from behind its utube key may have changed it (lib.lua utube_done)
  permits = redis.call('LLEN', not_full)
  if len == 0 and look(closed) then
    -- every item queued had expired (dropped on the way): closed and empty now, as above
    local status = closed_status(nowait, flag, waiting, wake, state_of, ext, consumers, me, inflight, meta)
    if status then return status end
  end
end
if len > 0 then
  local want = 1
  -- at most 1000 (unpack's limit is 8000 values): the caller asks again for more
  if mode ~= 'nowait' then want = wanted(len) end
  local now = now_ms_text()
  -- (a reliable consumer holds one native delivery at most: the held list)
  if native and not taken and mode ~= 'many' and mode ~= 'log' and ITEMS_TYPE == 'list'
      and (default_mode or redis.call('EXISTS', held) == 0) then
    -- the items move by the BLMOVEs behind this script (see the header): here, the decision
    -- and the accounting. (A user the ACL refuses RENAME gets entries, as without 'N'.)
    local renamed = redis.pcall('RENAME', items_key, ext .. 'gate')
    if not (type(renamed) == 'table' and renamed.err) then
      local first = add(delivery_seq, want) - want + 1
      redis.call('RPUSH', held, 'n:' .. first .. ':' .. now .. ':')
      len = len - want
      add(consumed_messages, want)
      keep_permit(not_full, len + waiting, bound, permits)
      stop_waiting()
      if mode == 'block' then redis.call('LPUSH', inbox, 's:') end  -- its BLMOVE answers at once
      return {first, want, tonumber(now), len}
    end
  end
  local items, in_held = nil, false
  if taken then
    items, want = taken, #taken
  elseif mode == 'batch' and want == len and want > 1 then
    -- the whole queue: the items list becomes the held list (the top of this script dropped
    -- the last one), its items stay there as they are, not copied
    items = items_take_all(items_key, held, want)
    in_held = items ~= nil
  end
  if not items then
    if want == 1 then items = {items_pop(items_key)} else items = items_pop_all(items_key, want) end
  end
  local seq = add(delivery_seq, want) - want
  if mode == 'batch' then
    local bytes, counts = 0, ''
    for _, item in ipairs(items) do bytes = bytes + items_size(item) end
    if states then
      local deliveries, again = {}, false
      for i = 1, want do
        deliveries[i] = 1 + (states[i] and states[i].count or 0)
        again = again or deliveries[i] > 1
      end
      if again then counts = table.concat(deliveries, ',') end
    end
    add(consumed_messages, want)
    redis.call('INCRBY', consumed_bytes, bytes)
    keep_permit(not_full, len - want + waiting, bound, permits)
    stop_waiting()
    items[want + 1] = 'h:' .. (seq + 1) .. ':' .. now .. ':' .. counts
    if in_held then
      redis.call('LPUSH', held, items[want + 1])
    else
      -- the same order appended, not prepended: each element pushed at a list's head moves
      -- what its listpack node holds (up to 8 KB) along, for every item
      local newest_first = {items[want + 1]}
      for i = want, 1, -1 do newest_first[want - i + 2] = items[i] end
      redis.call('RPUSH', held, unpack(newest_first))
    end
    return items
  end
  local entries, counts, again, bytes = {}, nil, nil, 0
  if log then counts, again = {}, {} end  -- (a table made is garbage for every other get)
  for i, item in ipairs(items) do
    bytes = bytes + items_size(item)
    local deliveries = '1'  -- text: no number to format (see now_ms_text) unless redelivered
    local s = states and states[i]
    if s then
      if s.count > 0 then
        deliveries = s.count + 1
        if log then again[#again + 1], again[#again + 2] = seq + i, deliveries end
      end
      -- a reliable take: its ttl, ttr and key stay, under its delivery number, until it is settled
      if not settles and s.meta ~= NO_META then redis.call('HSET', meta, 'd' .. (seq + i), s.meta) end
    end
    if not log then
      entries[i] = (seq + i) .. ':' .. deliveries .. ':' .. now .. ':' .. item
    else
      counts[i] = deliveries
    end
  end
  len = len - want
  add(consumed_messages, want)
  redis.call('INCRBY', consumed_bytes, bytes)
  keep_permit(not_full, len + waiting, bound, permits)
  stop_waiting()
  if log then
    local seqs = {}
    for i = 1, want do seqs[i] = seq + i end
    log_tail = log_chunk(log, log .. ':tail', log_tail, logs, ARGV[8], producer, items, seqs, counts,
                         string.rep(now .. ' ', want - 1) .. now)
    return {log_tail, want, unpack(again)}
  end
  if mode == 'many' then
    redis.call('LPUSH', inflight, unpack(entries))
    return entries
  end
  if mode == 'nowait' then
    redis.call('LPUSH', inflight, entries[1])
    if flag == 'n' then return {entries[1], len} end
    return entries[1]
  end
  redis.call('LPUSH', inbox, entries[1])
  if len > 0 then return 2 end
  return 1
end
keep_permit(not_full, waiting, bound, permits)
if nowait then return -5 end
-- empty and open: wait holding the consumer role, as the protocol's Get does
if not registered then
  redis.call('RPOP', consumer_free)
  redis.call('SET', waiter_key, me)
end
-- the lease names the waiter; renewed when it is someone else's or half gone
local lease_key = ext .. 'lease'
if redis.call('GET', lease_key) ~= me or redis.call('PTTL', lease_key) * 2 < tonumber(lease_ms) then
  redis.call('SET', lease_key, me, 'PX', lease_ms)
end
return -6
