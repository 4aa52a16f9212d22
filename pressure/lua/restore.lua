-- Give back a role token whose recorded holder is known to be dead (a plain
-- spec client that died holding it), only if the role is still taken and the
-- holder is still the one found dead.
-- KEYS[1] - :producer_free or :consumer_free
-- KEYS[2] - :producer or :consumer
-- ARGV[1] - identifier of the dead holder
-- return 1 if the token was restored, 0 otherwise
local role_free, role_holder = KEYS[1], KEYS[2]
local dead_holder = ARGV[1]
if redis.call('LLEN', role_free) == 0 and redis.call('GET', role_holder) == dead_holder then
  redis.call('LPUSH', role_free, '1')
  return 1
end
return 0
