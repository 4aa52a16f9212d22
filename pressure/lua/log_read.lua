-- Read a range of a log (see log_append.lua) as its chunks, as they are stored:
-- a reader cuts them itself, so the server does no work per item. Read only.
-- KEYS[1] - the log (a stream: :pressure:logs:<group>)
-- KEYS[2] - the log's committed number (:pressure:logs:<group>:committed)
-- ARGV[1] - the first number wanted
-- ARGV[2] - the last number wanted (inclusive)
-- ARGV[3] - enough items: no chunk is added once the chunks returned hold this many
-- return {committed, then seven strings per chunk, in the log's order, from the one holding
--   the first number wanted (or the next one the log holds) to the one holding the last, or
--   fewer: the number of its last item, and its fields l, s, d, t, p and i (see
--   log_append.lua; an entry written before chunks comes as a chunk of one)}; a reader must
--   not use items numbered up to committed: a commit has dropped them, or will
local log, committed_key = KEYS[1], KEYS[2]
local first, last, enough = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local reply = {redis.call('GET', committed_key) or '0'}
local r, got, from = 1, 0, first
while true do
  local entries = redis.call('XRANGE', log, from .. '-0', '+', 'COUNT', '8')
  if #entries == 0 then return reply end
  for _, entry in ipairs(entries) do
    local n, f = string.sub(entry[1], 1, -3), entry[2]
    if f[1] == 'n' then  -- a chunk: n, l, s, d, t, p, i
      reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = n, f[4], f[6], f[8]
      reply[r + 5], reply[r + 6], reply[r + 7] = f[10], f[12], f[14]
      got = got + tonumber(f[2])
    else  -- an entry per item: i, s, d, t, p
      reply[r + 1], reply[r + 2], reply[r + 3], reply[r + 4] = n, tostring(#f[2]), f[4], f[6]
      reply[r + 5], reply[r + 6], reply[r + 7] = f[8], f[10], f[2]
      got = got + 1
    end
    r = r + 7
    from = tonumber(n) + 1
    if from > last or got >= enough then return reply end
  end
end
