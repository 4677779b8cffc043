-- include: chunk, oom, recovery
-- fetch: take up to n ids from the head of the active list into this consumer's in-flight
-- set and return them with their messages, in queue order.
-- A suspect job (recovered SUSPECT times in a row or more, lib/recovery.lua) is only ever
-- taken alone, and only by a consumer that runs nothing: if it crashes its worker again,
-- no other job is charged a recovery for it. A batch stops before a suspect. A job
-- recovered once is fetched like any other, so one crash does not slow the queue down.
-- KEYS[1] consumers   KEYS[2] active list   KEYS[3] in-flight set   KEYS[4] data hash
-- KEYS[5] signal list   KEYS[6] recovered hash
-- ARGV[1] this consumer's in-flight set key   ARGV[2] n (1 to 1000)
-- ARGV[3] "1" if this consumer runs nothing (it may take a suspect), else "0"
-- Returns a flat array id1, message1, id2, message2, ...; a missing message is nil. When
-- the batch is a suspect taken alone, one more element follows: "suspect". When a suspect
-- is next and ARGV[3] is not "1", the reply is just {"suspect"} and nothing is taken.
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
local available = #ids
local suspect = false
if available > 0 and redis.call('EXISTS', KEYS[6]) == 1 then
  local recoveries = hmget_chunked(KEYS[6], ids)
  for i = 1, available do
    if recoveries[i] and tonumber(recoveries[i]) >= SUSPECT then
      if i > 1 then
        ids = {unpack(ids, 1, i - 1)}
      elseif ARGV[3] == '1' then
        ids = {ids[1]}
        suspect = true
      else
        return {'suspect'}
      end
      break
    end
  end
end
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
-- Only a fetch that took all there was may clear the signal: a batch cut short before a
-- suspect leaves jobs behind.
if available < n and #ids == available then redis.call('DEL', KEYS[5]) end
if suspect then reply[#reply + 1] = 'suspect' end
return reply
