-- include: chunk, flow
-- deregister: after a clean stop, drop this consumer from the consumers set, but only if
-- it holds no job: anything left in flight stays visible to the custodians. Dropping its
-- held count (stale if a curlyq consumer acknowledged its jobs) wakes a starved queue.
-- KEYS[1] consumers sorted set   KEYS[2] this consumer's in-flight set   KEYS[3] held hash
-- KEYS[4] flow settings hash   KEYS[5] active list   KEYS[6] signal list
-- ARGV[1] this consumer's in-flight set key (its member in the consumers set)
-- Returns 1 if removed, 0 if jobs are still in flight (the consumer stays registered).
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('HDEL', KEYS[3], ARGV[1]) == 1 then wake_after_release(KEYS[4], KEYS[5], KEYS[6]) end
return 1
