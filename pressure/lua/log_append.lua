-- Move deliveries from a consumer's in-flight list into a replayable log, in
-- the order given, atomically: each becomes the log's next entry. The log is
-- a stream whose entry ids are '<n>-0', n counting 1, 2, 3... per log (a
-- consumer group of its own: pressure/log.py). An id no longer in flight (its
-- visibility timeout passed and it was requeued) is skipped: it is queued
-- again, not lost, and not logged twice.
-- KEYS[1] - the consumer's in-flight list (:pressure:inflight:<id>)
-- KEYS[2] - the log (a stream: :pressure:logs:<group>)
-- KEYS[3] - the log's tail, the last number given (:pressure:logs:<group>:tail)
-- KEYS[4] - :producer (the last producer, recorded with each entry)
-- KEYS[5] - :pressure:logs (a set: the groups that have a log, removed with the queue)
-- ARGV[1] - the group's name
-- ARGV[2..] - delivery numbers, in the order to log them
-- return the log's tail after the append
local inflight, log, tail_key = KEYS[1], KEYS[2], KEYS[3]
local producer_key, logs = KEYS[4], KEYS[5]
local group = ARGV[1]
local wanted = {}
for i = 2, #ARGV do wanted[ARGV[i]] = true end
-- one pass over the in-flight list: what is wanted is logged, the rest is kept in order
local held, kept = {}, {}
for _, entry in ipairs(redis.call('LRANGE', inflight, 0, -1)) do
  local seq = string.match(entry, '^([^:]*):')
  if seq and wanted[seq] and not held[seq] then held[seq] = entry else table.insert(kept, entry) end
end
local tail = tonumber(redis.call('GET', tail_key) or '0')
local producer = redis.call('GET', producer_key) or ''
for i = 2, #ARGV do
  local entry = held[ARGV[i]]
  if entry then
    held[ARGV[i]] = nil
    local seq, deliveries, ms = string.match(entry, '^([^:]*):([^:]*):([^:]*):')
    local item = string.sub(entry, #seq + #deliveries + #ms + 4)
    tail = tail + 1
    redis.call('XADD', log, tail .. '-0', 'i', item, 's', seq, 'd', deliveries, 't', ms,
               'p', producer)
  end
end
rewrite_list(inflight, kept)
redis.call('SET', tail_key, tail)
redis.call('SADD', logs, group)
return tail
