-- include: time, chunk, types, flow, groups, events
-- push group: store each job whose id is new and put it at the end of its group's line
-- (mode "now": gq's own keys, lib/groups.lua; the active list, which curlyq consumers read,
-- never holds it), or schedule it at its time with its group noted, so that it joins its
-- group's line when due (enqueue_due.lua). Raises the signal for "now" (unless paused) and
-- drops any cancel request left for a new id by an earlier job.
-- KEYS[1] data hash   KEYS[2] scheduled sorted set   KEYS[3] signal list
-- KEYS[4] flow settings hash   KEYS[5] cancelled sorted set   KEYS[6] active list
-- KEYS[7..13] the group keys
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] "now", "at" (times are unix seconds) or "after" (delays added to the server's TIME)
-- ARGV    then id1, message1, time1, group1, ...  (at most 1000 quadruples; time ignored
-- for "now"; an empty group is no group: the job is queued or scheduled as push.lua and
-- schedule.lua do)
-- Returns an array with one integer per job, in order: 1 stored, 0 the id exists.
local G = group_keys(7)
check_types({KEYS[1], 'hash', KEYS[2], 'zset', KEYS[6], 'list', unpack(group_types(G))})
local mode = ARGV[1]
local offset = 0
if mode == 'after' then offset = server_now() end
local earliest = nil  -- announced to the schedulers (lib/time.lua)
local results, stored, lines, order, plain = {}, {}, {}, {}, {}
for i = 2, #ARGV, 4 do
  local id, group = ARGV[i], ARGV[i + 3]
  if redis.call('HSETNX', KEYS[1], id, ARGV[i + 1]) == 1 then
    stored[#stored + 1] = id
    results[#results + 1] = 1
    if mode == 'now' and group == '' then
      plain[#plain + 1] = id
    elseif mode == 'now' then
      if not lines[group] then lines[group] = {}; order[#order + 1] = group end
      lines[group][#lines[group] + 1] = id
    else
      local at = offset + tonumber(ARGV[i + 2])
      redis.call('ZADD', KEYS[2], at, id)
      if earliest == nil or at < earliest then earliest = at end
      if group ~= '' then redis.call('HSET', G.later, id, group) end
    end
  else
    results[#results + 1] = 0
  end
end
events_stored('enqueued', results, ARGV, 2, 4)
for _, group in ipairs(order) do group_append(G, group, lines[group]) end
call_chunked('RPUSH', KEYS[6], plain)
forget_cancels(KEYS[5], stored)
if #order > 0 or #plain > 0 then raise_signal_unless_paused(KEYS[4], KEYS[3]) end
announce_due(KEYS[2], earliest)
return results
