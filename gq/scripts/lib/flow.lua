-- Library: flow control (SPEC section 9, docs/flow-control.md). Needs lib/chunk.lua.
-- The settings hash (Q:flow): "paused" = "1"; "rate" jobs per "period" ms; "concurrency";
-- "hold_until", server ms before which nothing is fetched (a handler raised RateLimited);
-- "starved" = "1" while a consumer waits for room under the concurrency limit.
-- The held hash (Q:held): in-flight set key -> its SCARD, rewritten by every script that
-- changes a gq consumer's in-flight set, so the total over the hash is the number of jobs
-- held (buffered or running) by gq consumers. Being a copy of SCARD rather than a counter
-- of its own, it cannot drift: a lost reply re-sent, a curlyq ack or a crash can only make
-- it stale until the next script on that set, and the custodian drops the entries of
-- consumers that are gone (tidy.lua).

local function note_held(held_key, inflight_key)
  local n = redis.call('SCARD', inflight_key)
  if n > 0 then
    redis.call('HSET', held_key, inflight_key, n)
  else
    redis.call('HDEL', held_key, inflight_key)
  end
end

local function total_held(held_key)
  local total = 0
  for _, n in ipairs(redis.call('HVALS', held_key)) do total = total + tonumber(n) end
  return total
end

-- A fetch that found the concurrency limit reached cleared the signal its consumer then
-- waits on, and marked the queue "starved"; a script that releases a job raises the
-- signal again, once, if jobs are waiting. Unmarked, a release costs one HGET.
local function starve(flow_key, signal_key)
  redis.call('DEL', signal_key)
  redis.call('HSET', flow_key, 'starved', '1')
end

local function wake_after_release(flow_key, active_key, signal_key)
  if redis.call('HGET', flow_key, 'starved') == '1' then
    redis.call('HDEL', flow_key, 'starved')
    if redis.call('LLEN', active_key) > 0 then raise_signal(signal_key) end
  end
end

-- "The queue may have jobs", unless it is paused: resuming raises the signal itself, so
-- a producer does not wake every consumer of a paused queue for nothing.
local function raise_signal_unless_paused(flow_key, signal_key)
  if redis.call('HGET', flow_key, 'paused') ~= '1' then raise_signal(signal_key) end
end

-- The rate limit is GCRA (the generic cell rate algorithm: a token bucket kept as one
-- timestamp, the "theoretical arrival time" of the next start). Starts are spaced
-- period / rate apart, with a burst of BURST_SHARE of the rate (at least 1) allowed
-- ahead, so that a consumer fetching in batches is not held to one job per round trip.
-- Any window of one period sees at most rate + burst - 1 starts.
local BURST_SHARE = 0.1

local function rate_burst(rate)
  return math.max(1, math.ceil(rate * BURST_SHARE))
end

-- How many of n jobs may be fetched at server time now (ms), and, when none may, how many
-- ms until one may.
local function rate_allowance(rate_key, rate, period, now, n)
  local interval = period / rate
  local burst = rate_burst(rate)
  local tat = math.max(tonumber(redis.call('GET', rate_key)) or 0, now)
  local allowed = math.floor((now - tat) / interval + burst + 1e-9)
  if allowed < 1 then
    return 0, math.max(1, math.ceil(tat - (burst - 1) * interval - now))
  end
  return math.min(n, allowed), 0
end

-- Charge `taken` starts to the limit: the key lives only while it still says something.
local function rate_charge(rate_key, rate, period, now, taken)
  local interval = period / rate
  local tat = math.max(tonumber(redis.call('GET', rate_key)) or 0, now) + taken * interval
  redis.call('SET', rate_key, string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 1)
end
