-- include: time, chunk, oom, recovery, types, flow, history, ack, groups, group_take, outcome, events
-- fetch: acknowledge the ids this consumer finished (the acks that ride on the fetch, as
-- ack.lua does), then take up to n ids from the head of the active list into this
-- consumer's in-flight set and return them with their messages, in queue order, within
-- the queue's flow control (lib/flow.lua): nothing while paused or held back by a
-- handler's RateLimited, no more than the concurrency limit leaves free over all gq
-- consumers, no more than the rate limit allows now.
-- A suspect job (recovered SUSPECT times in a row or more, lib/recovery.lua) is only ever
-- taken alone, and only by a consumer that runs nothing: if it crashes its worker again,
-- no other job is charged a recovery for it. A batch stops before a suspect. A job
-- recovered once is fetched like any other, so one crash does not slow the queue down.
-- KEYS[1] consumers   KEYS[2] active list   KEYS[3] in-flight set   KEYS[4] data hash
-- KEYS[5] signal list   KEYS[6] recovered hash   KEYS[7] flow settings hash
-- KEYS[8] held hash   KEYS[9] rate limit state   KEYS[10] cancelled sorted set
-- KEYS[11..17] the group keys (lib/groups.lua): grouped jobs are taken from their groups'
-- lines in turn, within each group's limits and within the queue-wide ones; while both
-- ungrouped and grouped jobs wait, each gets half of a batch. With no grouped job waiting
-- the cost is one EXISTS per fetch.
-- KEYS[18] waiting sorted set   KEYS[19] results index list   KEYS[20] result slots
-- registry   KEYS[21..] the slots and the entries' keys of ARGV[5] (as ack_results.lua's
-- KEYS[19..])
-- KEYS[#KEYS - 1], KEYS[#KEYS] the flow settings hash, the events stream (lib/events.lua)
-- ARGV[1] this consumer's in-flight set key   ARGV[2] n (0 to 1000)
-- ARGV[3] "1" if this consumer runs nothing once the acks below are done (it may take a
-- suspect), else "0"   ARGV[4] the queue's channel   ARGV[5] "" or the entries blob of
-- jobs acknowledged with their outcomes, as ack_results.lua's ARGV[2] (the acks with a
-- result or a workflow's next step ride on the fetch too, written in this same call)
-- ARGV[6..] ids to acknowledge plainly (at most 1000 acks in all)
-- Returns {state, wait ms, acks, ack1, ..., id1, message1, id2, message2, ...}: `acks` is
-- the number of ack flags that follow (1 acknowledged, 0 not owned, one per id: the
-- blob's first, then ARGV[6..]'s), then the jobs taken; a missing message is nil.
-- state: "ok"; "suspect" (the batch is a suspect taken alone); "isolate" (a suspect is
-- next and ARGV[3] is not "1": nothing taken); "paused"; "full" (the concurrency limit is
-- reached: wait for the signal, which a release raises); "wait" (the rate limit or a
-- RateLimited hold: fetch again in `wait ms`, at most MAX_WAIT of lib/flow.lua). A batch
-- cut short by a limit carries the limit's state with the jobs it took. Flow settings out
-- of range (written by hand) are cut to lib/flow.lua's bounds, never an error after the
-- jobs were taken.
-- Errors with "GQNOTREGISTERED" when this consumer is not in the consumers set (then
-- nothing is acknowledged either).
-- Clears the signal when fewer than n jobs were there, in this same script, so a writer's
-- signal can never be lost between the read and the clear.
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return redis.error_reply('GQNOTREGISTERED consumer ' .. ARGV[1] .. ' is not registered')
end
pass_at_maxmemory('SREM', KEYS[3])  -- runs at maxmemory too (lib/oom.lua)
-- gq's own keys, whose wrong type would only show after the jobs were taken.
local G = group_keys(11)
check_types({KEYS[4], 'hash', KEYS[6], 'hash', KEYS[7], 'hash', KEYS[8], 'hash',
             KEYS[9], 'string', KEYS[10], 'zset', unpack(group_types(G))})
history_open()  -- the two KEYS before the events' two (optional): lib/history.lua

-- How many may be taken, or why none: (n, state, wait ms, now, rate, period).
local function allowance(n)
  local flow = redis.call('HMGET', KEYS[7], 'paused', 'rate', 'period', 'concurrency', 'hold_until')
  if flow[1] == '1' then
    redis.call('DEL', KEYS[5])  -- resume raises it again
    return 0, 'paused', 0
  end
  local now
  if flow[2] or flow[5] then now = server_now() * 1000 end
  local held_back = flow[5] and hold_wait(flow[5], now) or 0
  if held_back > 0 then return 0, 'wait', held_back end
  local state = 'ok'
  if flow[4] then
    local free = tonumber(flow[4]) - total_held(KEYS[8])
    if free < 1 then
      starve(KEYS[7], KEYS[5])  -- a release raises the signal again (wake_after_release)
      return 0, 'full', 0
    end
    if free < n then n, state = free, 'full' end
  end
  local rate, period = rate_settings(flow[2], flow[3])
  if not rate then return n, state, 0 end
  local allowed, until_next = rate_allowance(KEYS[9], rate, period, now, n)
  if allowed < 1 then return 0, 'wait', until_next, now, rate, period end
  if allowed < n then n, state = allowed, 'wait' end
  return n, state, 0, now, rate, period
end

-- Up to n ids from the head of the active list, stopping before a suspect (or taking it
-- alone): (ids, available, suspect state or nil).
local function head(n, idle)
  local ids = redis.call('LRANGE', KEYS[2], 0, n - 1)
  local available = #ids
  if available == 0 or redis.call('EXISTS', KEYS[6]) == 0 then return ids, available end
  local recoveries = hmget_chunked(KEYS[6], ids)
  for i = 1, available do
    if recoveries[i] and tonumber(recoveries[i]) >= SUSPECT then
      if i > 1 then return {unpack(ids, 1, i - 1)}, available end
      if idle then return {ids[1]}, available, 'suspect' end
      return {}, available, 'isolate'
    end
  end
  return ids, available
end

-- Append (id, message) pairs to the reply.
local function reply_jobs(reply, ids, messages)
  local base = #reply
  for i = 1, #ids do
    reply[base + 2 * i - 1] = ids[i]
    reply[base + 2 * i] = messages[i]
  end
end

-- The ids of ARGV[first..] whose flag says they were acknowledged.
local function owned_of(flags, first)
  local owned = {}
  for i = 1, #flags do
    if flags[i] == 1 then owned[#owned + 1] = ARGV[first + i - 1] end
  end
  return owned
end

-- Whether the head of the active list is a suspect (it must be taken alone).
local function suspect_next(active_key, recovered_key)
  if redis.call('EXISTS', recovered_key) == 0 then return false end
  local first = redis.call('LINDEX', active_key, 0)
  local count = first and redis.call('HGET', recovered_key, first)
  return count and tonumber(count) >= SUSPECT or false
end

-- The acks: those with an outcome (the blob's), then the plain ones; one flag list.
events_acked(KEYS[3], KEYS[4], ARGV[5], ARGV, 6)
local flags, owned = {}, {}
if ARGV[5] ~= '' then
  check_types({KEYS[18], 'zset', KEYS[19], 'list'})
  flags, owned = ack_outcomes(ARGV[5], 21, {KEYS[3], KEYS[4], KEYS[6], KEYS[10], KEYS[18],
                                            KEYS[19], KEYS[20]}, ARGV[4])
end
if #ARGV >= 6 then
  local plain = acknowledge(KEYS[3], KEYS[4], KEYS[6], KEYS[10], {unpack(ARGV, 6, #ARGV)})
  local plain_owned = owned_of(plain, 6)
  if #flags == 0 then
    flags, owned = plain, plain_owned
  else
    for i = 1, #plain do flags[#flags + 1] = plain[i] end
    for i = 1, #plain_owned do owned[#owned + 1] = plain_owned[i] end
  end
end
local acked = #owned
-- The limit below must see the room these acks freed.
if acked > 0 then
  note_held(KEYS[8], KEYS[3])
  group_release(G, owned, KEYS[5])
end
local wanted = tonumber(ARGV[2])
local n, state, wait, now, rate, period = allowance(wanted)
local rate_cut = state == 'wait' and n >= 1
local ids, available = {}, 0
-- Grouped jobs first, half a batch while ungrouped ones wait too; none when an idle
-- consumer may take a suspect, which must run alone.
local gids, gmessages, gstate, gwait = {}, {}, 'empty', 0
local grouped = n >= 1 and redis.call('EXISTS', G.lines) == 1
if grouped and not (ARGV[3] == '1' and suspect_next(KEYS[2], KEYS[6])) then
  local share = n
  if redis.call('LLEN', KEYS[2]) > 0 then share = math.ceil(n / 2) end
  gids, gmessages, gstate, gwait = group_take(G, share, KEYS[4], now or server_now() * 1000)
end
local asked = n - #gids
if asked >= 1 then
  local suspect
  ids, available, suspect = head(asked, ARGV[3] == '1' and #gids == 0)
  state = suspect or state
end
local reply = {state, math.min(wait, MAX_WAIT), #flags}
for i = 1, #flags do reply[3 + i] = flags[i] end
if #ids > 0 then
  -- Reads first: a script is not rolled back on error, and ids trimmed from the list but
  -- never added to the in-flight set would be lost.
  local messages = hmget_chunked(KEYS[4], ids)
  call_chunked('SADD', KEYS[3], ids)
  redis.call('LTRIM', KEYS[2], #ids, -1)
  reply_jobs(reply, ids, messages)
end
if #gids > 0 then
  call_chunked('SADD', KEYS[3], gids)
  reply_jobs(reply, gids, gmessages)
end
local took = #ids + #gids
if took > 0 and rate then rate_charge(KEYS[9], rate, period, now, took) end
if took > 0 then note_held(KEYS[8], KEYS[3]) end
-- What the groups left: with the active list done, their word is the state of the fetch.
local active_done = asked >= 1 and available < asked and #ids == available
if grouped then active_done = redis.call('LLEN', KEYS[2]) == 0 end
if grouped and state == 'ok' and took < n and active_done then
  if gstate == 'wait' then
    state, wait = 'wait', gwait
  elseif gstate == 'full' then
    state = 'full'
  end
  reply[1] = state
end
if rate_cut then
  -- The rate limit cut the batch: the next start is one interval after this batch.
  reply[2] = math.min(math.max(1, math.ceil(period / rate)), MAX_WAIT)
elseif state == 'wait' and n >= 1 then
  reply[2] = math.min(math.max(wait, 1), MAX_WAIT)
elseif state == 'full' and n >= 1 and #ids == available then
  starve(KEYS[7], KEYS[5])  -- room is gone; a release raises the signal again
elseif acked > 0 and state ~= 'full' and state ~= 'paused' then
  wake_after_release(KEYS[7], KEYS[2], KEYS[5])  -- what the acks freed, beyond this fetch
end
-- Only a fetch that took all there was may clear the signal: a batch cut short before a
-- suspect or by a limit leaves jobs behind.
local groups_wait = grouped and (gstate == 'wait' or (gstate == 'ok' and took < n))
if n >= 1 and active_done and not groups_wait and (not grouped or gstate ~= 'ok') then
  redis.call('DEL', KEYS[5])
elseif groups_wait and (state == 'ok' or (state == 'wait' and not rate_cut)) then
  -- Groups in the ring may give more at once, and groups held back by their time will
  -- in the ms replied: a poller waits for the signal after a short batch, so raise it.
  raise_signal(KEYS[5])
end
events_taken(reply, 4 + #flags)
return reply
