-- include: time, types
-- retry: if this consumer owns the job, move it to the scheduled set at server TIME + delay
-- and store its updated message (attempt + 1).
-- KEYS[1] in-flight set   KEYS[2] scheduled sorted set   KEYS[3] data hash
-- KEYS[4] recovered hash
-- ARGV[1] id   ARGV[2] updated message   ARGV[3] delay in seconds
-- Returns 1 if retried, 0 if this consumer does not own the job (nothing changed).
check_types({KEYS[1], 'set', KEYS[2], 'zset', KEYS[3], 'hash', KEYS[4], 'hash'})
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], server_now() + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[1])
return 1
