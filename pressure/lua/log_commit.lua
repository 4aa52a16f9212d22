-- Commit a log up to a number: its entries up to there are done and leave
-- Redis. Commits only move forward; an older commit changes nothing.
-- KEYS[1] - the log (a stream: :pressure:logs:<group>)
-- KEYS[2] - the log's committed number (:pressure:logs:<group>:committed)
-- ARGV[1] - the number to commit up to (inclusive)
-- return the committed number after the call
local log, committed_key = KEYS[1], KEYS[2]
local upto = tonumber(ARGV[1])
local committed = tonumber(redis.call('GET', committed_key) or '0')
if upto > committed then
  committed = upto
  redis.call('SET', committed_key, committed)
  redis.call('XTRIM', log, 'MINID', (committed + 1) .. '-0')
end
return committed
