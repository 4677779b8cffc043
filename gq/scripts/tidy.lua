-- include: time, dead, types, chunk, flow, groups
-- tidy (custodian, every pass): trim the dead set by age and size even when nothing dies, and
-- drop recovery counts whose job no longer exists (curlyq's ack does not know the recovered
-- hash, so in a mixed fleet its entries would leak and a reused id would inherit an old
-- count). The recovered hash is walked with HSCAN, a bounded step per call. Also drops the
-- held counts of consumers no longer registered (a curlyq custodian recovered them, or they
-- were reaped), so that no concurrency capacity leaks (a consumer waiting for that room is
-- woken), and cancel requests older than ARGV[5] seconds (their job was never seen again).
-- KEYS[1] dead sorted set   KEYS[2] data hash   KEYS[3] recovered hash   KEYS[4] held hash
-- KEYS[5] consumers sorted set   KEYS[6] cancelled sorted set   KEYS[7] flow settings hash
-- KEYS[8] active list   KEYS[9] signal list
-- KEYS[10..16] the group keys: a held grouped job whose message is gone (a curlyq consumer
-- acknowledged it) is released, so its group's capacity comes back; a scheduled one's note
-- is dropped; a group's rate state ("tat\n" .. group) or hold ("hold\n" .. group) that is
-- past is dropped (it says nothing: a past tat reads as now), so that no field per group
-- is kept for ever. One page of each of the three hashes per call (HSCAN COUNT
-- TIDY_GROUP_PAGE), each walk resumed from its own cursor, so every entry is seen over
-- successive calls with bounded work per call.
-- ARGV[1] dead_max_jobs   ARGV[2] dead_max_age in seconds
-- ARGV[3] the walks' HSCAN cursors, space-separated: recovered, groups' of, groups' later,
--         groups' state (missing ones are "0"; "0" alone starts every walk)
-- ARGV[4] HSCAN COUNT of the recovered hash
-- ARGV[5] how long a cancel request is kept, in seconds
-- Returns {the next cursors, as ARGV[3] takes them ("0" once every walk is complete),
-- dead jobs trimmed, counts dropped}.
check_types({KEYS[1], 'zset', KEYS[2], 'hash', KEYS[3], 'hash', KEYS[4], 'hash', KEYS[6], 'zset'})
local before = redis.call('ZCARD', KEYS[1])
local now = server_now()
trim_dead(KEYS[1], KEYS[2], now, tonumber(ARGV[1]), tonumber(ARGV[2]))
-- One field per gq consumer: a walk of the whole hash is bounded by the fleet's size.
local held = redis.call('HKEYS', KEYS[4])
local released = false
for _, key in ipairs(held) do
  if not redis.call('ZSCORE', KEYS[5], key) then
    redis.call('HDEL', KEYS[4], key)
    released = true
  end
end
if released then wake_after_release(KEYS[7], KEYS[8], KEYS[9]) end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now - tonumber(ARGV[5]))
local cursors = {}
for cursor in string.gmatch(ARGV[3], '%S+') do cursors[#cursors + 1] = cursor end
for i = 1, 4 do cursors[i] = cursors[i] or '0' end
local G = group_keys(10)
check_types(group_types(G))
local TIDY_GROUP_PAGE = 1000
for i, hash in ipairs({G.of, G.later}) do
  local page = redis.call('HSCAN', hash, cursors[i + 1], 'COUNT', TIDY_GROUP_PAGE)
  cursors[i + 1] = page[1]
  local entries, gone = page[2], {}
  for j = 1, #entries, 2 do
    if redis.call('HEXISTS', KEYS[2], entries[j]) == 0 then gone[#gone + 1] = entries[j] end
  end
  if hash == G.of then group_release(G, gone, KEYS[9])
  elseif #gone > 0 then call_chunked('HDEL', G.later, gone) end
end
local state = redis.call('HSCAN', G.state, cursors[4], 'COUNT', TIDY_GROUP_PAGE)
cursors[4] = state[1]
local now_ms, past = now * 1000, {}
for j = 1, #state[2], 2 do
  local field = state[2][j]
  if string.sub(field, 1, 4) == 'tat\n' or string.sub(field, 1, 5) == 'hold\n' then
    local at = tonumber(state[2][j + 1])
    if not at or at ~= at or at <= now_ms then past[#past + 1] = field end
  end
end
if #past > 0 then call_chunked('HDEL', G.state, past) end
local trimmed = before - redis.call('ZCARD', KEYS[1])
local page = redis.call('HSCAN', KEYS[3], cursors[1], 'COUNT', tonumber(ARGV[4]))
cursors[1] = page[1]
local entries = page[2]
local dropped = 0
for i = 1, #entries, 2 do
  if redis.call('HEXISTS', KEYS[2], entries[i]) == 0 then
    redis.call('HDEL', KEYS[3], entries[i])
    dropped = dropped + 1
  end
end
local next_cursors = table.concat(cursors, ' ')
if next_cursors == '0 0 0 0' then next_cursors = '0' end
return {next_cursors, trimmed, dropped}
