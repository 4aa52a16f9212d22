-- Give a role token back, if this client is its recorded holder and the role
-- is not free already (so a repeated call after a lost reply does nothing).
-- KEYS[1] - :producer_free or :consumer_free
-- KEYS[2] - :producer or :consumer
-- ARGV[1] - client identifier
-- return 1 if the token was pushed back, 0 otherwise
if redis.call('GET', KEYS[2]) == ARGV[1] and redis.call('LLEN', KEYS[1]) == 0 then
  redis.call('LPUSH', KEYS[1], 1)
  return 1
end
return 0
