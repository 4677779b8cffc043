-- include: chunk, oom
-- fetch: take up to n ids from the head of the active list into this consumer's in-flight
-- set and return them with their messages, in queue order.
-- KEYS[1] consumers   KEYS[2] active list   KEYS[3] in-flight set   KEYS[4] data hash
-- KEYS[5] signal list
-- ARGV[1] this consumer's in-flight set key   ARGV[2] n (1 to 1000)
-- Returns a flat array id1, message1, id2, message2, ...; a missing message is nil.
-- Errors with "GQNOTREGISTERED" when this consumer is not in the consumers set.
-- Clears the signal when fewer than n jobs were there, in this same script, so a writer's
-- signal can never be lost between the read and the clear.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return redis.error_reply('GQNOTREGISTERED consumer ' .. ARGV[1] .. ' is not registered')
end
local n = tonumber(ARGV[2])
-- LRANGE 0 -1 would take the whole list: a count below 1 takes nothing.
if n < 1 then return {} end
local ids = redis.call('LRANGE', KEYS[2], 0, n - 1)
local reply = {}
if #ids > 0 then
  -- Reads and the write that may fail on a wrong key type come first: a script is not
  -- rolled back on error, and ids trimmed from the list but never added to the
  -- in-flight set would be lost.
  local messages = hmget_chunked(KEYS[4], ids)
  pass_at_maxmemory('SREM', KEYS[3])  -- runs at maxmemory too (lib/oom.lua)
  call_chunked('SADD', KEYS[3], ids)
  redis.call('LTRIM', KEYS[2], #ids, -1)
  for i = 1, #ids do
    reply[2 * i - 1] = ids[i]
    reply[2 * i] = messages[i]
  end
end
if #ids < n then redis.call('DEL', KEYS[5]) end
return reply
