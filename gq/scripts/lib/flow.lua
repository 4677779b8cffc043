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

-- Bounds that keep every number the scripts write or reply finite and exact: a RateLimited
-- hold lasts at most MAX_HOLD seconds (gq.RateLimited.MAX_AFTER), a rate period at most
-- MAX_PERIOD ms and a rate at most MAX_RATE jobs per period (gq.queue's bounds); a reply's
-- wait is at most MAX_WAIT ms. Settings written by hand beyond them are cut to them.
local MAX_HOLD = 86400
local MAX_PERIOD = 30 * 86400 * 1000
local MAX_RATE = 1000000000
local MAX_WAIT = MAX_PERIOD

-- A new hold's seconds within [0, MAX_HOLD]; NaN and nil give 0.
local function clamp_hold(seconds)
  if not seconds or seconds ~= seconds or seconds <= 0 then return 0 end
  return math.min(seconds, MAX_HOLD)
end

-- The ms a stored hold_until (text, server ms) still holds the queue at now (ms): 0 for
-- none, junk or NaN, at most MAX_HOLD s (a hold written as "inf" before the cap).
local function hold_wait(hold_until, now)
  local at = tonumber(hold_until)
  if not at or at ~= at or at <= now then return 0 end
  return math.min(math.ceil(at - now), MAX_HOLD * 1000)
end

-- The rate settings as numbers within their bounds, or nil when they are not numbers.
local function rate_settings(rate, period)
  rate, period = tonumber(rate), tonumber(period)
  if not rate or not period or rate ~= rate or period ~= period then return nil end
  return math.min(math.max(rate, 1), MAX_RATE), math.min(math.max(period, 1), MAX_PERIOD)
end

-- A new life for an id (pushed, scheduled, queued again from dead, or dead itself) clears
-- any cancel request left for it: a request is for the job in flight when it was asked
-- (docs/decisions.md, "A cancel request is for one life of an id"). One EXISTS when none.
local function forget_cancels(cancelled_key, ids)
  if #ids > 0 and redis.call('EXISTS', cancelled_key) == 1 then
    call_chunked('ZREM', cancelled_key, ids)
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
