-- Library: groups, limits per tenant and fair turns (SPEC section 17, docs/flow-control.md).
-- Needs lib/chunk.lua (hmget_chunked, raise_signal) and lib/flow.lua (rate_settings,
-- rate_burst, hold_wait, clamp_hold).
-- A grouped job waits in its group's line, in gq's own keys, not in the active list, so
-- curlyq consumers never see it; fetch.lua takes from the groups in turn. Eight keys, all
-- named after the queue (one Cluster slot), passed by every script that touches them, in
-- this order (gq/store/groupkeys.py):
--   ring     sorted set: groups with jobs waiting and not parked -> their turn (lowest next)
--   parked   sorted set: groups left out of the ring -> server ms they may go again, or
--            FULL (-1): until one of their jobs is released (their concurrency limit)
--   lines    hash: group -> the sequence number of its first waiting job;
--            group .. "\n" .. sequence -> job id (each group's line, first in first out)
--   waiting  sorted set: group -> its jobs waiting (the busiest first for gq stats)
--   state    hash: "held\n" .. group -> its jobs held by gq consumers; "tat\n" .. group ->
--            its rate limit's next start (GCRA, server ms); "hold\n" .. group -> server ms
--            until which its RateLimited(group=True) holds it; "turn" -> the last turn given
--   limits   hash: "concurrency", "rate", "period" (ms) for every group; the same names
--            .. "\n" .. group for one group's own (which wins)
--   of       hash: job id -> its group, while the job is held (fetched, not yet released)
--   later    hash: job id -> its group, while the job is scheduled (a retry, a delay)
-- Group names are non-empty text without control characters (gq/groups.py checks), so
-- "\n" cannot occur in one.

local GROUP_FULL = -1
-- A fetch looks at most this many groups beyond the jobs it wants: a group at its limit is
-- parked (out of the ring) when looked at, so the work of one fetch is bounded however many
-- groups there are, and a parked group costs nothing until it is released.
local GROUP_LOOK_BEYOND = 50
-- Parked groups whose time has come, moved back to the ring per fetch at most.
local GROUP_WAKE_BATCH = 100
-- A fetch that found only groups held back by their time says "look again" in at most this
-- many ms, so that new jobs of other groups are not left waiting behind a long hold.
local GROUP_LOOK_AGAIN = 250

local GROUP_KEY_NAMES = {'ring', 'parked', 'lines', 'waiting', 'state', 'limits', 'of', 'later'}

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
  return {G.ring, 'zset', G.parked, 'zset', G.lines, 'hash', G.waiting, 'zset', G.state, 'hash',
          G.limits, 'hash', G.of, 'hash', G.later, 'hash'}
end

-- Into the ring, at the back, unless it is there or parked (parked groups come back when
-- released or when their time comes).
local function group_ready(G, group)
  if redis.call('ZSCORE', G.ring, group) or redis.call('ZSCORE', G.parked, group) then return end
  redis.call('ZADD', G.ring, redis.call('HINCRBY', G.state, 'turn', 1), group)
end

-- The sequence of the first waiting job and how many wait.
local function group_span(G, group)
  local waiting = tonumber(redis.call('ZSCORE', G.waiting, group)) or 0
  if waiting == 0 then return 0, 0 end
  return tonumber(redis.call('HGET', G.lines, group)) or 0, waiting
end

-- Append ids to the end of the group's line.
local function group_append(G, group, ids)
  if #ids == 0 then return end
  local head, waiting = group_span(G, group)
  if waiting == 0 then redis.call('HSET', G.lines, group, head) end
  for i = 1, #ids do
    redis.call('HSET', G.lines, group .. '\n' .. (head + waiting + i - 1), ids[i])
  end
  redis.call('ZINCRBY', G.waiting, #ids, group)
  group_ready(G, group)
end

-- Put ids back at the front of the group's line, in their order (recovered, given back).
local function group_prepend(G, group, ids)
  if #ids == 0 then return end
  local head = group_span(G, group)
  for i = #ids, 1, -1 do
    head = head - 1
    redis.call('HSET', G.lines, group .. '\n' .. head, ids[i])
  end
  redis.call('HSET', G.lines, group, head)
  redis.call('ZINCRBY', G.waiting, #ids, group)
  group_ready(G, group)
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

-- Release held jobs of groups (ack, retry, kill, requeue, recover): lower each group's held
-- count, bring back to the ring a group parked at its concurrency limit and raise the
-- signal for it. Returns, per id, its group or false (not a held grouped job). One EXISTS
-- when no grouped job is held: ungrouped work pays nothing per job.
local function group_release(G, ids, signal_key)
  if #ids == 0 or redis.call('EXISTS', G.of) == 0 then return {} end
  local groups = hmget_chunked(G.of, ids)
  local lines, order = by_group(ids, groups)
  if #order == 0 then return groups end
  call_chunked('HDEL', G.of, ids)
  local woken = false
  for _, group in ipairs(order) do
    local field = 'held\n' .. group
    if redis.call('HINCRBY', G.state, field, -#lines[group]) <= 0 then
      redis.call('HDEL', G.state, field)
    end
    if tonumber(redis.call('ZSCORE', G.parked, group)) == GROUP_FULL then
      redis.call('ZREM', G.parked, group)
      group_ready(G, group)
      woken = true
    end
  end
  if woken and signal_key then raise_signal(signal_key) end
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

-- A group's limits: its own, else every group's. (concurrency or nil, rate, period or nil)
local function group_limits(G, group, defaults)
  local own = redis.call('HMGET', G.limits, 'concurrency\n' .. group, 'rate\n' .. group,
                         'period\n' .. group)
  local concurrency = tonumber(own[1] or defaults[1])
  local rate, period
  if own[2] then rate, period = rate_settings(own[2], own[3])
  else rate, period = rate_settings(defaults[2], defaults[3]) end
  return concurrency, rate, period
end

local function group_park(G, group, until_ms)
  redis.call('ZREM', G.ring, group)
  redis.call('ZADD', G.parked, until_ms, group)
end

-- How many of a group's `cap` waiting jobs it may start now (0 parks it) and, when none
-- for a time, the ms until it may.
local function group_room(G, group, cap, defaults, now)
  local state = redis.call('HMGET', G.state, 'held\n' .. group, 'hold\n' .. group, 'tat\n' .. group)
  local held_back = state[2] and hold_wait(state[2], now) or 0
  if held_back > 0 then return 0, held_back end
  local concurrency, rate, period = group_limits(G, group, defaults)
  if concurrency then
    local free = concurrency - (tonumber(state[1]) or 0)
    if free < 1 then return 0, GROUP_FULL end
    cap = math.min(cap, free)
  end
  if not rate then return cap, 0 end
  local interval = period / rate
  local tat = math.max(tonumber(state[3]) or 0, now)
  local allowed = math.floor((now - tat) / interval + rate_burst(rate) + 1e-9)
  if allowed < 1 then
    return 0, math.max(1, math.ceil(tat - (rate_burst(rate) - 1) * interval - now))
  end
  return math.min(cap, allowed), 0, rate, period, tat
end

-- Fair turns: n jobs shared one at a time between the groups that may start some, in
-- ring order, so that a group with 100,000 waiting takes no more turns than one with 1.
local function share_turns(room, n)
  local give = {}
  for i = 1, #room do give[i] = 0 end
  local left, more = n, true
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

-- Take `take` ids from the front of a group's line, charge its held count and its rate
-- limit, and send it to the back of the ring (or out of it when its line is empty).
local function group_pop(G, group, take, head, waiting, rate, period, tat)
  local fields = {}
  for i = 1, take do fields[i] = group .. '\n' .. (head + i - 1) end
  local ids = hmget_chunked(G.lines, fields)
  call_chunked('HDEL', G.lines, fields)
  if take == waiting then
    redis.call('HDEL', G.lines, group)
    redis.call('ZREM', G.waiting, group)
    redis.call('ZREM', G.ring, group)
  else
    redis.call('HSET', G.lines, group, head + take)
    redis.call('ZINCRBY', G.waiting, -take, group)
    redis.call('ZADD', G.ring, redis.call('HINCRBY', G.state, 'turn', 1), group)
  end
  redis.call('HINCRBY', G.state, 'held\n' .. group, take)
  if rate then
    redis.call('HSET', G.state, 'tat\n' .. group, string.format('%.3f', tat + take * period / rate))
  end
  return ids
end

-- Groups parked for a time that has come go back into the ring.
local function group_wake(G, now)
  local due = redis.call('ZRANGEBYSCORE', G.parked, 0, now, 'LIMIT', 0, GROUP_WAKE_BATCH)
  for _, group in ipairs(due) do
    redis.call('ZREM', G.parked, group)
    redis.call('HDEL', G.state, 'hold\n' .. group)
    if (tonumber(redis.call('ZSCORE', G.waiting, group)) or 0) > 0 then group_ready(G, group) end
  end
end

-- Up to n jobs from the groups' lines, in turn, within each group's limits: ids (a job
-- whose message is gone, cancelled while it waited, is dropped from its line), their
-- messages, and why no more: "ok" (groups may have more now), "full" (what waits is
-- parked at its concurrency limit: a release raises the signal), "wait" (groups are
-- held back by their time: look again in the returned ms), "empty".
local function group_take(G, n, data_key, now)
  group_wake(G, now)
  local groups = redis.call('ZRANGE', G.ring, 0, n + GROUP_LOOK_BEYOND - 1)
  local defaults = redis.call('HMGET', G.limits, 'concurrency', 'rate', 'period')
  local open, room, spans, rates = {}, {}, {}, {}
  for _, group in ipairs(groups) do
    local head, waiting = group_span(G, group)
    if waiting == 0 then
      redis.call('ZREM', G.ring, group)
    else
      local cap, wait, rate, period, tat = group_room(G, group, waiting, defaults, now)
      if cap < 1 then
        group_park(G, group, wait == GROUP_FULL and GROUP_FULL or now + wait)
      else
        open[#open + 1] = group
        room[#room + 1] = cap
        spans[#spans + 1] = {head, waiting}
        rates[#rates + 1] = {rate, period, tat}
      end
    end
  end
  local give = share_turns(room, n)
  local ids = {}
  for i, group in ipairs(open) do
    if give[i] > 0 then
      local r = rates[i]
      local taken = group_pop(G, group, give[i], spans[i][1], spans[i][2], r[1], r[2], r[3])
      for _, id in ipairs(taken) do
        ids[#ids + 1] = id
        redis.call('HSET', G.of, id, group)
      end
    end
  end
  local messages, kept, kept_messages = hmget_chunked(data_key, ids), {}, {}
  local gone = {}
  for i = 1, #ids do
    if messages[i] then
      kept[#kept + 1] = ids[i]
      kept_messages[#kept_messages + 1] = messages[i]
    else
      gone[#gone + 1] = ids[i]
    end
  end
  if #gone > 0 then group_release(G, gone, nil) end
  if redis.call('ZCARD', G.ring) > 0 then return kept, kept_messages, 'ok', 0 end
  local first = redis.call('ZRANGEBYSCORE', G.parked, 0, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first > 0 then
    return kept, kept_messages, 'wait', math.max(1, math.min(tonumber(first[2]) - now, GROUP_LOOK_AGAIN))
  end
  if redis.call('ZCARD', G.parked) > 0 then return kept, kept_messages, 'full', 0 end
  return kept, kept_messages, 'empty', 0
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
