-- include: time, chunk, flow
-- periodic: enqueue one occurrence of a periodic schedule, at most once, decided on the
-- server's TIME. The cursor (KEYS[1], name -> the last occurrence handled) only moves
-- forward, in this script, so an occurrence is enqueued once even after its job was
-- acknowledged and deleted (an id check alone would enqueue it again).
-- KEYS[1] cursor hash (name -> last occurrence handled, unix seconds)
-- KEYS[2] rules hash (name -> the rule text that set the cursor)
-- KEYS[3] enqueued hash (name -> the last occurrence enqueued, unix seconds)
-- KEYS[4] data hash   KEYS[5] active list   KEYS[6] signal list   KEYS[7] cancelled sorted
-- set (a cancel request left for the job's id by an earlier job is dropped)
-- KEYS[8] runtime schedules hash (name -> record)   KEYS[9] paused runtime schedules hash
-- ARGV[1] name   ARGV[2] occurrence (unix seconds)   ARGV[3] the occurrence after it
-- ARGV[4] job id   ARGV[5] message   ARGV[6] rule text   ARGV[7] late limit in seconds
-- ARGV[8] '1' for a schedule added at runtime (gq periodic add), else '0'
-- Returns {outcome, server time as a string, cursor after the call or false}; outcome is
-- 'enqueued' (stored and queued), 'duplicate' (cursor moved, but the id still existed),
-- 'skipped' (a new or changed rule: cursor moved past an occurrence that is too late, so
-- nothing runs), 'done' (occurrence <= cursor), 'early' (occurrence > server time) or
-- 'stale' (too late, and a newer occurrence is due: propose that one) or 'withdrawn' (a
-- runtime schedule removed or paused since the consumer read it: nothing written).
local now = server_now()
local occurrence = tonumber(ARGV[2])
local cursor = redis.call('HGET', KEYS[1], ARGV[1])
cursor = cursor and tonumber(cursor)
local function reply(outcome, at)
  return {outcome, tostring(now), at and tostring(at) or false}
end
-- A consumer takes up removals and pauses at its next read of the schedules; until then
-- this check makes them exact: no occurrence after `gq periodic pause|remove` returned,
-- and no cursor written again after a removal forgot it.
if ARGV[8] == '1' and (redis.call('HEXISTS', KEYS[8], ARGV[1]) == 0
    or redis.call('HEXISTS', KEYS[9], ARGV[1]) == 1) then
  return reply('withdrawn', cursor)
end
if occurrence > now then return reply('early', cursor) end
if cursor and occurrence <= cursor then return reply('done', cursor) end
local late = now - occurrence
local on_time = late <= tonumber(ARGV[7])
if not on_time and now >= tonumber(ARGV[3]) then return reply('stale', cursor) end

-- Not rolled back on error: refuse before the first write if a key has the wrong type.
local wanted = {'hash', 'hash', 'hash', 'hash', 'list', 'list'}
for k = 1, 6 do
  local t = redis.call('TYPE', KEYS[k]).ok
  if t ~= 'none' and t ~= wanted[k] then
    error('GQWRONGTYPE ' .. KEYS[k] .. ' is a ' .. t .. ', not a ' .. wanted[k])
  end
end

-- A new schedule, or one whose rule changed, starts from now: no catch-up for it.
local fresh = not cursor or redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[6]
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[6])
if fresh and not on_time then return reply('skipped', occurrence) end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
if redis.call('HSETNX', KEYS[4], ARGV[4], ARGV[5]) == 0 then
  return reply('duplicate', occurrence)
end
redis.call('RPUSH', KEYS[5], ARGV[4])
forget_cancels(KEYS[7], {ARGV[4]})
raise_signal(KEYS[6])
return reply('enqueued', occurrence)
