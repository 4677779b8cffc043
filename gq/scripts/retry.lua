-- include: time, chunk, types, flow
-- retry: if this consumer owns the job, move it to the scheduled set at server TIME + delay
-- and store its updated message (attempt + 1).
-- KEYS[1] in-flight set   KEYS[2] scheduled sorted set   KEYS[3] data hash
-- KEYS[4] recovered hash   KEYS[5] held hash   KEYS[6] flow settings hash
-- KEYS[7] active list   KEYS[8] signal list
-- ARGV[1] id   ARGV[2] updated message   ARGV[3] delay in seconds
-- ARGV[4] (optional) seconds during which the whole queue fetches nothing: the handler
-- raised RateLimited, which charges no attempt (the caller sends the message unchanged)
-- Returns 1 if retried, 0 if this consumer does not own the job (nothing changed).
check_types({KEYS[1], 'set', KEYS[2], 'zset', KEYS[3], 'hash', KEYS[4], 'hash',
             KEYS[5], 'hash', KEYS[6], 'hash'})
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then return 0 end
local now = server_now()
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[1])
note_held(KEYS[5], KEYS[1])
local hold = tonumber(ARGV[4] or '0')
if hold > 0 then
  -- Extend a hold already there, never shorten it.
  local until_ms = math.floor((now + hold) * 1000)
  if until_ms > (tonumber(redis.call('HGET', KEYS[6], 'hold_until')) or 0) then
    redis.call('HSET', KEYS[6], 'hold_until', until_ms)
  end
else
  wake_after_release(KEYS[6], KEYS[7], KEYS[8])
end
return 1
