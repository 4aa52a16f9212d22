-- Commit a log up to a number: its entries up to there are done and leave
-- Redis. Commits only move forward; an older commit changes nothing.
-- KEYS[1] - the log (a stream: :pressure:logs:<group>)
-- KEYS[2] - the log's committed number (:pressure:logs:<group>:committed)
-- ARGV[1] - the number to commit up to (inclusive)
-- return the committed number after the call
local committed = tonumber(redis.call('GET', KEYS[2]) or '0')
local upto = tonumber(ARGV[1])
if upto > committed then
  committed = upto
  redis.call('SET', KEYS[2], committed)
  redis.call('XTRIM', KEYS[1], 'MINID', (committed + 1) .. '-0')
end
return committed
