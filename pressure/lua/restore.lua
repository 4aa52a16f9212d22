-- Give back a role token whose recorded holder is known to be dead (a plain
-- spec client that died holding it), only if the role is still taken and the
-- holder is still the one found dead.
-- KEYS[1] - :producer_free or :consumer_free
-- KEYS[2] - :producer or :consumer
-- ARGV[1] - identifier of the dead holder
-- return 1 if the token was restored, 0 otherwise
if redis.call('LLEN', KEYS[1]) == 0 and redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('LPUSH', KEYS[1], 1)
  return 1
end
return 0
