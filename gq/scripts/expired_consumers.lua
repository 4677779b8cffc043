-- include: time
-- expired consumers (step 1 of recover orphans): the in-flight set keys of consumers whose
-- last heartbeat is at or before server TIME - timeout, oldest first.
-- KEYS[1] consumers sorted set
-- ARGV[1] timeout in seconds (heartbeat interval + consumer timeout)   ARGV[2] most keys
-- Returns an array of in-flight set keys.
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', server_now() - tonumber(ARGV[1]),
  'LIMIT', 0, tonumber(ARGV[2]))
