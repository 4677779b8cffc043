-- include: chunk, oom, recovery, types, flow
-- fetch: take up to n ids from the head of the active list into this consumer's in-flight
-- set and return them with their messages, in queue order, within the queue's flow
-- control (lib/flow.lua): nothing while paused or held back by a handler's RateLimited,
-- no more than the concurrency limit leaves free over all gq consumers, no more than the
-- rate limit allows now.
-- A suspect job (recovered SUSPECT times in a row or more, lib/recovery.lua) is only ever
-- taken alone, and only by a consumer that runs nothing: if it crashes its worker again,
-- no other job is charged a recovery for it. A batch stops before a suspect. A job
-- recovered once is fetched like any other, so one crash does not slow the queue down.
-- KEYS[1] consumers   KEYS[2] active list   KEYS[3] in-flight set   KEYS[4] data hash
-- KEYS[5] signal list   KEYS[6] recovered hash   KEYS[7] flow settings hash
-- KEYS[8] held hash   KEYS[9] rate limit state
-- ARGV[1] this consumer's in-flight set key   ARGV[2] n (1 to 1000)
-- ARGV[3] "1" if this consumer runs nothing (it may take a suspect), else "0"
-- Returns {state, wait ms, id1, message1, id2, message2, ...}; a missing message is nil.
-- state: "ok"; "suspect" (the batch is a suspect taken alone); "isolate" (a suspect is
-- next and ARGV[3] is not "1": nothing taken); "paused"; "full" (the concurrency limit is
-- reached: wait for the signal, which a release raises); "wait" (the rate limit or a
-- RateLimited hold: fetch again in `wait ms`). A batch cut short by a limit carries the
-- limit's state with the jobs it took.
-- Errors with "GQNOTREGISTERED" when this consumer is not in the consumers set.
-- Clears the signal when fewer than n jobs were there, in this same script, so a writer's
-- signal can never be lost between the read and the clear.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return redis.error_reply('GQNOTREGISTERED consumer ' .. ARGV[1] .. ' is not registered')
end
pass_at_maxmemory('SREM', KEYS[3])  -- runs at maxmemory too (lib/oom.lua)
-- gq's own keys, whose wrong type would only show after the jobs were taken.
check_types({KEYS[7], 'hash', KEYS[8], 'hash', KEYS[9], 'string'})
local n = tonumber(ARGV[2])
-- LRANGE 0 -1 would take the whole list: a count below 1 takes nothing.
if n < 1 then return {'ok', 0} end

local state, wait = 'ok', 0
local flow = redis.call('HMGET', KEYS[7], 'paused', 'rate', 'period', 'concurrency', 'hold_until')
local now, rate, period
if flow[1] == '1' then
  redis.call('DEL', KEYS[5])  -- resume raises it again
  return {'paused', 0}
end
if flow[2] or flow[5] then now = now_ms() end
if flow[5] and tonumber(flow[5]) > now then
  return {'wait', math.ceil(tonumber(flow[5]) - now)}
end
if flow[4] then
  local free = tonumber(flow[4]) - total_held(KEYS[8])
  if free < 1 then
    redis.call('DEL', KEYS[5])  -- a release raises it again (wake_after_release)
    return {'full', 0}
  end
  if free < n then n, state = free, 'full' end
end
if flow[2] then
  rate, period = tonumber(flow[2]), tonumber(flow[3])
  local allowed, until_next = rate_allowance(KEYS[9], rate, period, now, n)
  if allowed < 1 then return {'wait', until_next} end
  if allowed < n then n, state = allowed, 'wait' end
end

local ids = redis.call('LRANGE', KEYS[2], 0, n - 1)
local available = #ids
if available > 0 and redis.call('EXISTS', KEYS[6]) == 1 then
  local recoveries = hmget_chunked(KEYS[6], ids)
  for i = 1, available do
    if recoveries[i] and tonumber(recoveries[i]) >= SUSPECT then
      if i > 1 then
        ids = {unpack(ids, 1, i - 1)}
      elseif ARGV[3] == '1' then
        ids = {ids[1]}
        state = 'suspect'
      else
        return {'isolate', 0}
      end
      break
    end
  end
end
local reply = {state, wait}
if #ids > 0 then
  -- Reads and the write that may fail on a wrong key type come first: a script is not
  -- rolled back on error, and ids trimmed from the list but never added to the
  -- in-flight set would be lost.
  local messages = hmget_chunked(KEYS[4], ids)
  call_chunked('SADD', KEYS[3], ids)
  redis.call('LTRIM', KEYS[2], #ids, -1)
  for i = 1, #ids do
    reply[2 * i + 1] = ids[i]
    reply[2 * i + 2] = messages[i]
  end
  note_held(KEYS[8], KEYS[3])
  if rate then rate_charge(KEYS[9], rate, period, now, #ids) end
end
if state == 'wait' then
  -- The rate limit cut the batch: the next start is one interval after this batch.
  reply[2] = math.max(1, math.ceil(period / rate))
elseif state == 'full' and #ids == available then
  redis.call('DEL', KEYS[5])  -- room is gone; a release raises it again
end
-- Only a fetch that took all there was may clear the signal: a batch cut short before a
-- suspect or by a limit leaves jobs behind.
if available < n and #ids == available then redis.call('DEL', KEYS[5]) end
return reply
