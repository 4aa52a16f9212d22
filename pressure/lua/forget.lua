-- Remove pressure's own keys of a queue that is gone (deleted by a plain spec
-- client, which cannot know them). Run by a client that found the queue
-- missing. Gone means: no :bound and neither role token list (a spec Delete
-- deletes each token list once it holds that token; a pressure Delete removes
-- everything in one step), and no registered waiter: a waiter holds the
-- consumer role, and must find its registration to give the role back.
-- KEYS[1] - :bound
-- KEYS[2] - :producer_free
-- KEYS[3] - :consumer_free
-- KEYS[4] - :pressure:waiter
-- KEYS[5] - :pressure:consumers (whose inbox, in-flight and held lists go too)
-- KEYS[6..] - pressure's other fixed keys of the queue
-- ARGV[1] - inbox key prefix (:pressure:inbox:)
-- ARGV[2] - in-flight key prefix (:pressure:inflight:)
-- ARGV[3] - held-batch key prefix (:pressure:held:)
-- ARGV[4] - :pressure:logs (the set naming the logs kept beside the queue)
-- return how many keys were deleted, or -1 if the queue is not gone
local bound_key, producer_free, consumer_free = KEYS[1], KEYS[2], KEYS[3]
local waiter_key, consumers = KEYS[4], KEYS[5]
local inbox_prefix, inflight_prefix, held_prefix = ARGV[1], ARGV[2], ARGV[3]
local logs = ARGV[4]
if redis.call('EXISTS', bound_key, producer_free, consumer_free, waiter_key) > 0 then return -1 end
local others = {}
for i = 6, #KEYS do table.insert(others, KEYS[i]) end
local deleted = forget_queue(consumers, inbox_prefix, inflight_prefix, held_prefix, logs, others)
return deleted + redis.call('DEL', consumers)
