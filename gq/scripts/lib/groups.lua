-- Library: groups, limits per tenant and fair turns (SPEC section 17, docs/flow-control.md).
-- Needs lib/chunk.lua (hmget_chunked, raise_signal) and lib/flow.lua (rate_settings,
-- rate_burst, hold_wait, clamp_hold).
-- A grouped job waits in its group's line, in gq's own keys, not in the active list, so
-- curlyq consumers never see it; fetch.lua takes from the groups in turn. Seven keys, all
-- named after the queue (one Cluster slot), passed by every script that touches them, in
-- this order (gq/store/groupkeys.py):
--   ring     list: the groups with jobs waiting and not parked, in turn (the next first);
--            a group is in it exactly when it has jobs waiting and is not parked
--   parked   sorted set: groups left out of the ring -> server ms they may go again, or
--            FULL (-1): until one of their jobs is released (their concurrency limit)
--   lines    hash: group -> the sequence number of its first waiting job, group .. "\nend"
--            -> the one after its last; group .. "\n" .. sequence -> job id (each group's
--            line, first in first out; both fields gone when it has none waiting)
--   state    hash: "held\n" .. group -> its jobs held by gq consumers; "tat\n" .. group ->
--            its rate limit's next start (GCRA, server ms); "hold\n" .. group -> server ms
--            until which its RateLimited(group=True) holds it
--   limits   hash: "concurrency", "rate", "period" (ms) for every group; the same names
--            .. "\n" .. group for one group's own (which wins)
--   of       hash: job id -> its group, while the job is held (fetched, not yet released)
--            and its group is under a concurrency limit: only those are counted (a group
--            without one has nothing to count, and its jobs cost no bookkeeping per job)
--   later    hash: job id -> its group, while the job is scheduled (a retry, a delay)
-- Group names are non-empty text without control characters (gq/groups.py checks), so
-- "\n" cannot occur in one.

-- A parked score: until a release of one of its jobs (its concurrency limit).
local GROUP_FULL = -1
local GROUP_KEY_NAMES = {'ring', 'parked', 'lines', 'state', 'limits', 'of', 'later'}

-- The group keys, passed from KEYS[first] on (gq/store/groupkeys.py: the same order).
local function group_keys(first)
  local G = {}
  for i, name in ipairs(GROUP_KEY_NAMES) do
    local k = first + i - 1
    G[name] = KEYS[k]
  end
  return G
end

local function group_types(G)
  return {G.ring, 'list', G.parked, 'zset', G.lines, 'hash', G.state, 'hash',
          G.limits, 'hash', G.of, 'hash', G.later, 'hash'}
end

-- Into the ring, at the back, for a group that was out of it (it had no job waiting, or it
-- was parked) unless it is parked: the ring's rule above holds without a search of it.
local function group_ready(G, group)
  if redis.call('ZSCORE', G.parked, group) then return end
  redis.call('RPUSH', G.ring, group)
end

-- The sequence of the first waiting job and how many wait.
local function group_span(G, group)
  local span = redis.call('HMGET', G.lines, group, group .. '\nend')
  local head = tonumber(span[1]) or 0
  return head, math.max(0, (tonumber(span[2]) or head) - head)
end

local function group_waiting(G, group)
  local _, waiting = group_span(G, group)
  return waiting
end

-- Append ids to the end of the group's line.
local function group_append(G, group, ids)
  if #ids == 0 then return end
  local head, waiting = group_span(G, group)
  local slots = {}
  for i = 1, #ids do
    slots[#slots + 1] = group .. '\n' .. (head + waiting + i - 1)
    slots[#slots + 1] = ids[i]
  end
  call_chunked('HSET', G.lines, slots)
  redis.call('HSET', G.lines, group, head, group .. '\nend', head + waiting + #ids)
  if waiting == 0 then group_ready(G, group) end
end

-- Put ids back at the front of the group's line, in their order (recovered, given back).
local function group_prepend(G, group, ids)
  if #ids == 0 then return end
  local head, waiting = group_span(G, group)
  local tail = head + waiting
  for i = #ids, 1, -1 do
    head = head - 1
    redis.call('HSET', G.lines, group .. '\n' .. head, ids[i])
  end
  redis.call('HSET', G.lines, group, head, group .. '\nend', tail)
  if waiting == 0 then group_ready(G, group) end
end

-- Jobs listed as (id, group) pairs in a flat array, grouped: {group -> {ids}} and the
-- groups in first-seen order.
local function by_group(ids, groups)
  local lines, order = {}, {}
  for i = 1, #ids do
    local group = groups[i]
    if group then
      if not lines[group] then lines[group] = {}; order[#order + 1] = group end
      local line = lines[group]
      line[#line + 1] = ids[i]
    end
  end
  return lines, order
end

-- ZMSCORE over any number of members (nil scores come back as false).
local function zmscore_chunked(key, members)
  local values = {}
  for i = 1, #members, CHUNK do
    local part = redis.call('ZMSCORE', key, unpack(members, i, math.min(i + CHUNK - 1, #members)))
    for j = 1, math.min(CHUNK, #members - i + 1) do values[i + j - 1] = part[j] or false end
  end
  return values
end

-- Groups parked at their concurrency limit (of `groups`) back into the ring; whether any.
local function group_unpark_full(G, groups)
  if #groups == 0 or redis.call('EXISTS', G.parked) == 0 then return false end
  local scores = zmscore_chunked(G.parked, groups)
  local woken = false
  for i, group in ipairs(groups) do
    if tonumber(scores[i]) == GROUP_FULL then
      redis.call('ZREM', G.parked, group)
      if group_waiting(G, group) > 0 then group_ready(G, group) end
      woken = true
    end
  end
  return woken
end

-- Release held jobs of groups (ack, retry, kill, requeue, recover): lower each group's held
-- count, bring back to the ring a group parked at its concurrency limit and raise the
-- signal for it. Returns, per id, its group or false (not a held grouped job). One EXISTS
-- when no grouped job is held: ungrouped work pays nothing per job. A handful of commands
-- per call however many groups: the counts are read and written in one HMGET and one HSET.
local function group_release(G, ids, signal_key)
  if #ids == 0 or redis.call('EXISTS', G.of) == 0 then return {} end
  local groups = hmget_chunked(G.of, ids)
  local counts, order, owned = {}, {}, {}
  for i = 1, #ids do
    local group = groups[i]
    if group then
      if not counts[group] then counts[group] = 0; order[#order + 1] = group end
      counts[group] = counts[group] + 1
      owned[#owned + 1] = ids[i]
    end
  end
  if #order == 0 then return groups end
  call_chunked('HDEL', G.of, owned)
  local fields = {}
  for i, group in ipairs(order) do fields[i] = 'held\n' .. group end
  local helds = hmget_chunked(G.state, fields)
  local keep, drop = {}, {}
  for i, group in ipairs(order) do
    local left = (tonumber(helds[i]) or 0) - counts[group]
    if left > 0 then
      keep[#keep + 1] = fields[i]
      keep[#keep + 1] = left
    else
      drop[#drop + 1] = fields[i]
    end
  end
  call_chunked('HSET', G.state, keep)
  call_chunked('HDEL', G.state, drop)
  if group_unpark_full(G, order) and signal_key then raise_signal(signal_key) end
  return groups
end

-- Scheduled grouped jobs whose time came, back into their groups' lines; the others are
-- returned for the active list. One EXISTS when no grouped job is scheduled.
local function group_due(G, ids)
  if #ids == 0 or redis.call('EXISTS', G.later) == 0 then return ids end
  local groups = hmget_chunked(G.later, ids)
  local lines, order = by_group(ids, groups)
  if #order == 0 then return ids end
  call_chunked('HDEL', G.later, ids)
  for _, group in ipairs(order) do group_append(G, group, lines[group]) end
  local rest = {}
  for i = 1, #ids do
    if not groups[i] then rest[#rest + 1] = ids[i] end
  end
  return rest
end

-- Park a group that may be in the ring (a RateLimited hold: rare, so the LREM's walk of
-- the ring is paid only then).
local function group_park(G, group, until_ms)
  if not redis.call('ZSCORE', G.parked, group) then redis.call('LREM', G.ring, 0, group) end
  redis.call('ZADD', G.parked, until_ms, group)
end

-- RateLimited(group=True): hold the group for `seconds` (a hold already longer is kept).
local function group_hold(G, group, seconds, now)
  local hold = clamp_hold(seconds)
  if hold <= 0 then return end
  local field = 'hold\n' .. group
  if hold * 1000 <= hold_wait(redis.call('HGET', G.state, field), now) then return end
  local until_ms = math.floor(now + hold * 1000)
  redis.call('HSET', G.state, field, until_ms)
  local parked = tonumber(redis.call('ZSCORE', G.parked, group))
  if parked == GROUP_FULL or not parked or parked < until_ms then group_park(G, group, until_ms) end
end
