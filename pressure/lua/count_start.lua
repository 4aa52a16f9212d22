-- A worker counts the start of a task it claimed with an earlier one (claim.lua
-- marked it 'pre'), sent without waiting for the reply (no round trip of its
-- own), just before it runs the task. The count goes in only while the task has
-- a mark: a task with none has finished (settle.lua), and a count reaching the
-- server after that (it went on another connection than the settlement, or its
-- worker started a copy another worker had run and settled meanwhile) would
-- outlive the task.
-- KEYS[1] - the executor's claims hash
-- ARGV[1] - task id
-- return the task's count of starts made this way ('<task id>:started'), or 0 if
-- it has no mark (finished: nothing counted)
local claims = KEYS[1]
local task_id = ARGV[1]
if not redis.call('HGET', claims, task_id) then return 0 end
return redis.call('HINCRBY', claims, task_id .. ':started', '1')
