-- Library: a fetch's turns between groups (SPEC section 17): which groups it serves, how
-- many jobs each gives, and taking them from their lines (lib/groups.lua holds the keys,
-- the lines and the releases). Needs lib/chunk.lua, lib/flow.lua and lib/groups.lua.

-- A fetch looks at most this many groups beyond the jobs it wants: a group at its limit is
-- parked (out of the ring) when looked at, so the work of one fetch is bounded however many
-- groups there are, and a parked group costs nothing until it is released.
local GROUP_LOOK_BEYOND = 50
-- A turn: the most jobs one group gives a fetch while other groups wait their turn. More
-- than one spreads each group's bookkeeping (its line's head, its place in the ring) over
-- several jobs; few, so that a big group delays a small one by a few jobs per consumer.
local GROUP_TURN = 4
-- Parked groups whose time has come, moved back to the ring per fetch at most.
local GROUP_WAKE_BATCH = 100
-- A fetch that found only groups held back by their time says "look again" in at most this
-- many ms, so that new jobs of other groups are not left waiting behind a long hold.
local GROUP_LOOK_AGAIN = 250

-- Fair turns: n jobs shared between the groups that may start some, in ring order, a turn
-- of at most GROUP_TURN jobs each, then (the ring read to its end) one at a time between
-- those with more, so that a group with 100,000 waiting takes no more turns than one with 1.
local function share_turns(room, n)
  local give = {}
  local left = n
  for i = 1, #room do
    local take = room[i] < GROUP_TURN and room[i] or GROUP_TURN
    if take > left then take = left end
    give[i] = take
    left = left - take
  end
  local more = true
  while left > 0 and more do
    more = false
    for i = 1, #room do
      if left == 0 then break end
      if give[i] < room[i] then
        give[i] = give[i] + 1
        left = left - 1
        more = true
      end
    end
  end
  return give
end

-- Groups parked for a time that has come go back into the ring.
local function group_wake(G, now)
  local due = redis.call('ZRANGEBYSCORE', G.parked, 0, now, 'LIMIT', 0, GROUP_WAKE_BATCH)
  for _, group in ipairs(due) do
    redis.call('ZREM', G.parked, group)
    redis.call('HDEL', G.state, 'hold\n' .. group)
    if group_waiting(G, group) > 0 then group_ready(G, group) end
  end
end

-- What the groups of a fetch read, one HMGET or ZMSCORE per kind for all of them: jobs
-- waiting, first sequence, limits (each group's own only when some group has its own:
-- the "own" flag), held counts and rate state (only when some limit needs them). A group
-- in the ring is never under a RateLimited hold (the hold parks it; waking clears it).
-- Written into r (a table per kind, KINDS below) from index base + 1 on: a fetch reads
-- its groups in rounds, and a round's figures land where the fetch keeps them.
local function spans_read(G, groups, r, base)
  local fields = {}
  for i = 1, #groups do
    fields[2 * i - 1] = groups[i]
    fields[2 * i] = groups[i] .. '\nend'
  end
  local spans = hmget_chunked(G.lines, fields)
  local heads, waiting = r.heads, r.waiting
  for i = 1, #groups do
    local head = tonumber(spans[2 * i - 1]) or 0
    local count = (tonumber(spans[2 * i]) or head) - head
    heads[base + i] = head
    waiting[base + i] = count > 0 and count or 0
  end
end

-- Each group's limits (its own, or every group's); whether any is under a concurrency
-- limit, and under a rate limit.
local function limits_read(G, groups, r, base)
  local defaults = redis.call('HMGET', G.limits, 'concurrency', 'rate', 'period', 'own')
  local concurrency = tonumber(defaults[1])
  local rate, period = rate_settings(defaults[2], defaults[3])
  local own = {}
  if defaults[4] then
    local fields = {}
    for i = 1, #groups do
      local group = groups[i]
      fields[3 * i - 2] = 'concurrency\n' .. group
      fields[3 * i - 1] = 'rate\n' .. group
      fields[3 * i] = 'period\n' .. group
    end
    own = hmget_chunked(G.limits, fields)
  end
  local any_concurrency, any_rate = false, false
  for i = 1, #groups do
    local k, c, rt = base + i, own[3 * i - 2], own[3 * i - 1]
    if c then r.concurrency[k] = tonumber(c) else r.concurrency[k] = concurrency end
    if rt then r.rate[k], r.period[k] = rate_settings(rt, own[3 * i])
    else r.rate[k], r.period[k] = rate, period end
    any_concurrency = any_concurrency or r.concurrency[k] ~= nil
    any_rate = any_rate or r.rate[k] ~= nil
  end
  return any_concurrency, any_rate
end

-- Held counts and rate state, read only when some group's limit needs them.
local function state_read(G, groups, r, base, any_concurrency, any_rate)
  local held, tat = r.held, r.tat
  if not (any_concurrency or any_rate) then
    for i = base + 1, base + #groups do held[i] = 0; tat[i] = 0 end
    return
  end
  local fields = {}
  for _, group in ipairs(groups) do
    if any_concurrency then fields[#fields + 1] = 'held\n' .. group end
    if any_rate then fields[#fields + 1] = 'tat\n' .. group end
  end
  local state = hmget_chunked(G.state, fields)
  local per = (any_concurrency and 1 or 0) + (any_rate and 1 or 0)
  for i = 1, #groups do
    held[base + i] = any_concurrency and (tonumber(state[per * (i - 1) + 1]) or 0) or 0
    tat[base + i] = any_rate and (tonumber(state[per * i]) or 0) or 0
  end
end

local function groups_read(G, groups, r, base)
  spans_read(G, groups, r, base)
  state_read(G, groups, r, base, limits_read(G, groups, r, base))
end

-- How many of a group's waiting jobs it may start now, or 0 and the score to park it
-- with (FULL: until a release; else the server ms when its rate limit allows one).
local function group_room(r, i, now)
  local cap = r.waiting[i]
  local concurrency, rate = r.concurrency[i], r.rate[i]
  if concurrency then
    local free = concurrency - r.held[i]
    if free < 1 then return 0, GROUP_FULL end
    cap = math.min(cap, free)
  end
  if not rate then return cap end
  local interval = r.period[i] / rate
  local tat = math.max(r.tat[i], now)
  local allowed = math.floor((now - tat) / interval + rate_burst(rate) + 1e-9)
  if allowed < 1 then
    return 0, now + math.max(1, math.ceil(tat - (rate_burst(rate) - 1) * interval - now))
  end
  r.tat[i] = tat
  return math.min(cap, allowed)
end

local DIGITS = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}

-- The line's fields of `take` jobs from sequence `head` on, appended to `fields` from
-- index `nf` + 1; the new count. A field is its group's prefix and the sequence in
-- decimal: the digits but the last are formatted once per ten jobs and the last is
-- appended, because formatting a number costs more than the rest of a job's fetch in
-- Lua (a negative sequence, from jobs put back at the front, is formatted whole).
local function line_fields(fields, nf, group, head, take)
  local prefix = group .. '\n'
  local tens
  for j = head, head + take - 1 do
    nf = nf + 1
    if j < 0 then
      fields[nf] = prefix .. string.format('%d', j)
    else
      local digit = j % 10
      if tens == nil or digit == 0 then
        tens = j < 10 and prefix or prefix .. string.format('%d', (j - digit) / 10)
      end
      fields[nf] = tens .. DIGITS[digit]
    end
  end
  return nf
end

-- The held jobs' groups (id -> group, for the "of" hash) of the counted groups' jobs:
-- `counted` maps a field's index to its group, only where the group is counted.
local function held_pairs(ids, counted)
  local of = {}
  for i, group in pairs(counted) do
    if ids[i] then of[#of + 1] = ids[i]; of[#of + 1] = group end
  end
  return of
end

-- Take give[i] jobs from the front of each group's line and write back, in one command per
-- kind for all groups, the lines, the counts, the ring (served groups to its back, in
-- turn), held counts, rate state and the held jobs' groups. Returns the ids.
local function groups_pop(G, groups, give, r)
  local fields, nf, counted = {}, 0, {}
  local heads, ring, state, drop_lines = {}, {}, {}, {}
  for i, group in ipairs(groups) do
    local take = give[i] or 0
    if take > 0 then
      local head, waiting = r.heads[i], r.waiting[i]
      local first = nf + 1
      nf = line_fields(fields, nf, group, head, take)
      if take == waiting then
        drop_lines[#drop_lines + 1] = group
        drop_lines[#drop_lines + 1] = group .. '\nend'
      else
        heads[#heads + 1] = group; heads[#heads + 1] = head + take
        ring[#ring + 1] = group
      end
      if r.concurrency[i] ~= nil then
        for k = first, nf do counted[k] = group end
        state[#state + 1] = 'held\n' .. group; state[#state + 1] = r.held[i] + take
      end
      local rate = r.rate[i]
      if rate then
        state[#state + 1] = 'tat\n' .. group
        state[#state + 1] = string.format('%.3f', r.tat[i] + take * r.period[i] / rate)
      end
    end
  end
  local ids = hmget_chunked(G.lines, fields)
  call_chunked('HDEL', G.lines, fields)
  call_chunked('HDEL', G.lines, drop_lines)
  call_chunked('HSET', G.lines, heads)
  call_chunked('RPUSH', G.ring, ring)  -- served: to the back, in the order they were served
  call_chunked('HSET', G.state, state)
  call_chunked('HSET', G.of, held_pairs(ids, counted))
  return ids
end

-- The groups a fetch of n jobs serves, from the front of the ring: rounds of reads, each
-- for the groups still missing (a group that may start a job serves at least one), so
-- that a small fetch reads few groups; a group that may not start one now is parked on
-- the way, at most n + GROUP_LOOK_BEYOND groups looked at in all. Returns the groups
-- looked at (taken out of the ring), what was read of them, the indexes of the open ones
-- and the jobs each may start.
local KINDS = {'waiting', 'heads', 'concurrency', 'rate', 'period', 'held', 'tat'}

local function groups_look(G, n, now)
  local groups, r, open, room, seen = {}, {}, {}, {}, {}
  for _, kind in ipairs(KINDS) do r[kind] = {} end
  local budget = n + GROUP_LOOK_BEYOND
  local turns = 0  -- jobs the open groups give in their turns
  while turns < n and #groups < budget do
    local missing = math.ceil((n - turns) / GROUP_TURN)
    local looked = redis.call('LRANGE', G.ring, 0, math.min(missing, budget - #groups) - 1)
    if #looked == 0 then break end
    redis.call('LTRIM', G.ring, #looked, -1)
    local base, batch = #groups, {}
    -- Each group once (a duplicate, which the ring's rule rules out, is dropped here).
    for k = 1, #looked do
      local group = looked[k]
      if not seen[group] then seen[group] = true; batch[#batch + 1] = group end
    end
    groups_read(G, batch, r, base)
    local park = {}
    for j = 1, #batch do
      local i = base + j
      groups[i] = batch[j]
      if r.waiting[i] > 0 then
        local cap, until_ms = group_room(r, i, now)
        if cap < 1 then
          park[#park + 1] = until_ms; park[#park + 1] = batch[j]
        else
          open[#open + 1] = i
          room[#room + 1] = cap
          turns = turns + (cap < GROUP_TURN and cap or GROUP_TURN)
        end
      end
    end
    call_chunked('ZADD', G.parked, park)
  end
  return groups, r, open, room
end

-- The ids whose message is there, and their messages. A job whose message is gone
-- (cancelled while it waited) is released; the common case, none gone, copies nothing.
local function found(G, ids, messages)
  local n = #ids
  local whole = true
  for i = 1, n do
    if not messages[i] then whole = false; break end
  end
  if whole then return ids, messages end
  local kept, kept_messages, lost = {}, {}, {}
  for i = 1, n do
    if messages[i] then
      kept[#kept + 1] = ids[i]
      kept_messages[#kept_messages + 1] = messages[i]
    elseif ids[i] then
      lost[#lost + 1] = ids[i]
    end
  end
  if #lost > 0 then group_release(G, lost, nil) end
  return kept, kept_messages
end

-- Up to n jobs from the groups' lines, in turn, within each group's limits: ids (a job
-- whose message is gone, cancelled while it waited, is dropped from its line), their
-- messages, and why no more: "ok" (groups may have more now), "full" (what waits is
-- parked at its concurrency limit: a release raises the signal), "wait" (groups are
-- held back by their time: look again in the returned ms), "empty".
local function group_take(G, n, data_key, now)
  group_wake(G, now)
  local groups, r, open, room = groups_look(G, n, now)
  local kept, kept_messages = {}, {}
  if #groups > 0 then
    local shares, give, unserved = share_turns(room, n), {}, {}
    for k, i in ipairs(open) do
      give[i] = shares[k]
      if shares[k] == 0 then unserved[#unserved + 1] = groups[i] end
    end
    -- Groups that had no turn this time stay at the front, in their order.
    for k = #unserved, 1, -1 do redis.call('LPUSH', G.ring, unserved[k]) end
    local ids = groups_pop(G, groups, give, r)
    kept, kept_messages = found(G, ids, hmget_chunked(data_key, ids))
  end
  if redis.call('LLEN', G.ring) > 0 then return kept, kept_messages, 'ok', 0 end
  local first = redis.call('ZRANGEBYSCORE', G.parked, 0, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first > 0 then
    return kept, kept_messages, 'wait', math.max(1, math.min(tonumber(first[2]) - now, GROUP_LOOK_AGAIN))
  end
  if redis.call('ZCARD', G.parked) > 0 then return kept, kept_messages, 'full', 0 end
  return kept, kept_messages, 'empty', 0
end
