-- Read the unfinished task count (lib.lua unfinished_of) and the id of the last all-done event, so
-- that join() can wait for the next event with XREAD from exactly that id.
-- KEYS[1] - :bound
-- KEYS[2] - :stats:produced_messages
-- KEYS[3] - :pressure:tasks_done
-- KEYS[4] - :pressure:all_tasks_done
-- return {unfinished, last event id} or {-4, ''} if the queue does not exist
local bound_key, produced_messages, tasks_done = KEYS[1], KEYS[2], KEYS[3]
local all_tasks_done = KEYS[4]
if redis.call('EXISTS', bound_key) == 0 then return {-4, ''} end
local produced = counter(produced_messages)
local done = counter(tasks_done)
local last = redis.call('XREVRANGE', all_tasks_done, '+', '-', 'COUNT', '1')
local id = '0-0'
if #last > 0 then id = last[1][1] end
return {unfinished_of(produced, done), id}
