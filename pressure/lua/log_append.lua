-- Move deliveries from a consumer's in-flight list into a replayable log, in
-- the order given, atomically, as the log's next entries. The log is a stream
-- (pressure/spark/log.py) whose items are numbered 1, 2, 3... per log; one call
-- appends them as one stream entry, a chunk, whose id is '<n>-0' for n the
-- number of its last item (a chunk of c items holds n - c + 1 .. n, so the
-- trim of a commit, XTRIM MINID, drops exactly the chunks committed whole), with
-- the fields, in this order: 'n' (c), 'l', 's', 'd', 't' (each item's length,
-- delivery number, deliveries and taken-at ms, space-separated), 'p' (the
-- producer) and 'i' (the items, concatenated). A log written before chunks holds
-- an entry per item ('<n>-0': fields i, s, d, t, p); log_read.lua reads both. An
-- id no longer in flight (its visibility timeout passed and it was requeued) is
-- skipped: it is queued again, not lost, and not logged twice. A logged item
-- leaves the queue's care (its ttl, ttr and utube key go: lib.lua entry_done).
-- get.lua 'log' takes items straight into a log, in one step, the same way
-- (lib.lua log_reads, log_chunk).
-- KEYS[1] - the consumer's in-flight list (:pressure:inflight:<id>)
-- KEYS[2] - the log (a stream: :pressure:logs:<group>)
-- KEYS[3] - the log's tail, the last number given (:pressure:logs:<group>:tail)
-- KEYS[4] - :producer (the last producer, recorded with each chunk)
-- KEYS[5] - :pressure:logs (a set: the groups that have a log, removed with the queue)
-- KEYS[6] - :pressure:meta (a logged item's ttl, ttr and utube key go; used with the keys
--           named from it as ack.lua uses them)
-- ARGV[1] - the group's name
-- ARGV[2..] - delivery numbers, in the order to log them
-- return the log's tail after the append (an error, changing nothing, if the log's keys
-- do not fit: lib.lua log_reads)
local inflight, log, tail_key = KEYS[1], KEYS[2], KEYS[3]
local producer_key, logs, meta = KEYS[4], KEYS[5], KEYS[6]
local group = ARGV[1]
local tail, producer = log_reads(log, tail_key, logs, producer_key)
if not tail then return redis.error_reply('PRESSURE bad log ' .. log) end
local wanted = {}
for i = 2, #ARGV do wanted[ARGV[i]] = true end
-- one pass over the in-flight list: what is wanted is logged, the rest is kept in order
local deliveries, times, items, kept = {}, {}, {}, {}
local entries = {}
for _, entry in ipairs(redis.call('LRANGE', inflight, '0', '-1')) do
  local seq, count, ms, at = string.match(entry, '^([^:]*):([^:]*):([^:]*):()')
  if seq and wanted[seq] and not items[seq] then
    deliveries[seq], times[seq], items[seq], entries[seq] = count, ms, string.sub(entry, at), entry
  else
    kept[#kept + 1] = entry
  end
end
local chunk, seqs, counts, stamps = {}, {}, {}, {}
local c = 0
local has_meta = redis.call('EXISTS', meta) == 1
for i = 2, #ARGV do
  local seq = ARGV[i]
  local item = items[seq]
  if item then
    items[seq] = nil
    c = c + 1
    chunk[c], seqs[c], counts[c], stamps[c] = item, seq, deliveries[seq], times[seq]
    if has_meta then entry_done(meta, entries[seq], items_push_all, items_len) end
  end
end
rewrite_list(inflight, kept)
return log_chunk(log, tail_key, tail, logs, group, producer, chunk, seqs, counts, table.concat(stamps, ' '))
