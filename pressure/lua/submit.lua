-- An executor marks tasks submitted, just before it puts them (earlier in the
-- same pipeline). The mark lives until the task leaves the queue (settle.lua),
-- so a worker that finds none knows the task has finished: a second copy, left
-- by a submit retried after a lost reply, is dropped, not run again (claim.lua).
-- KEYS[1] - the executor's claims hash
-- ARGV[1..] - task ids
-- return how many were marked (a task marked already keeps its mark)
local claims = KEYS[1]
local marked = 0
for i = 1, #ARGV do
  marked = marked + redis.call('HSETNX', claims, ARGV[i], 'q')
end
return marked
