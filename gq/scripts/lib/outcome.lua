-- Library: a job's outcome (SPEC section 16), written in the same call that acknowledges
-- (ack_results.lua, fetch.lua) or kills (kill.lua) it. Needs lib/time.lua, lib/flow.lua,
-- lib/chunk.lua and lib/ack.lua. curlyq
-- never reads these keys: Q:result-slot:<ttl ms>:<slot> (a hash, id -> the server time
-- the job ended as a MessagePack str, then the record, MessagePack written by gq: the
-- results of one TTL that ended in one slot of time, gq.store.keys.QueueKeys.result_slot;
-- it expires a TTL after its last write, and a reader takes a record as gone a TTL after
-- it ended), Q:result-slots (sorted set: slot key -> when it expires, ms; what a reader
-- looks in), Q:results (list of the ids that kept one, newest first, at most INDEX_MAX), Q:waiting
-- (sorted set name -> deadline of a caller of get() waiting for it: the outcome is
-- published on the queue's channel only for those; one EXISTS per call when none waits).
-- An entry, read from a table of fields E (ARGV, or an entries blob's fields) at `at`, its
-- keys from KEYS at `k` on, in order: ttl in ms (0: nothing kept; else its slot is the
-- caller's for that TTL), record, number of follow-ups, then each follow-up with its keys
-- next:
--   "push"   id message                    keys: data, active, signal, flow
--   "gpush"  id message group              keys: data, active, signal, flow, the 7 group
--                                          keys (lib/groups.lua): queued in its group's line
--   "member" field value keep_ms gid chan  keys: group, data, active, signal, flow, waiting,
--                                          the 7 group keys (all of the group's queue; the
--                                          callback joins its group's line when the group's
--                                          state names one, "cb_group")
--   "fail"   member keep_ms gid chan       keys: group, waiting
-- (arguments after the kind, keys)
local SIZES = {push = {2, 4}, gpush = {3, 11}, member = {5, 13}, fail = {4, 2}}
local INDEX_MAX = 1000

local function time_str(now)
  local s = string.format('%.6f', now)
  return string.char(0xa0 + #s) .. s  -- a MessagePack fixstr (#s < 32)
end

-- The n keys from KEYS[k] on (an entry names them by their first index).
local function keys_from(k, n)
  local found = {}
  for i = 1, n do
    found[i] = KEYS[k]
    k = k + 1
  end
  return found
end

local function tell_waiters(waiting_key, channel, name)
  if redis.call('EXISTS', waiting_key) == 1 and redis.call('ZSCORE', waiting_key, name) then
    redis.call('ZREM', waiting_key, name)
    redis.call('PUBLISH', channel, name)
  end
end

-- The next job of a workflow: stored and queued unless its id exists (a deterministic id
-- and the same duplicate refusal as push.lua), so it is enqueued once.
-- A job with a group (`group` not false) joins its group's line (the group keys from
-- KEYS[gk] on), so its group's limits and turns apply (SPEC section 17).
local function push_follow_up(k, id, message, group, gk)
  local data, active, signal, flow = unpack(keys_from(k, 4), 1, 4)
  if redis.call('HSETNX', data, id, message) == 1 then
    if group then
      group_append(group_keys(gk), group, {id})
    else
      redis.call('RPUSH', active, id)
    end
    raise_signal_unless_paused(flow, signal)
  end
end

-- A member of a group succeeded: its value under its field (once), the count of members
-- left lowered; at zero the group's state gets its TTL (keep_ms, from its last member's
-- end: until then it lives on start_group's safety TTL, so members that start late, a
-- backlog or retries, still find it) and the callback stored at enqueue (if any) is
-- queued unless a member failed. A state gone (expired, deleted) is not made again.
local function member_done(k, field, value, keep_ms, gid, channel)
  local group = KEYS[k]
  local waiting = keys_from(k, 6)[6]
  if redis.call('EXISTS', group) == 0 or redis.call('HSETNX', group, field, value) == 0 then
    return
  end
  local left = redis.call('HINCRBY', group, 'left', -1)
  if left > 0 then return end
  redis.call('PEXPIRE', group, keep_ms)
  if redis.call('HEXISTS', group, 'failed') == 1 then return end  -- (its waiters were told)
  local cb_id = redis.call('HGET', group, 'cb_id')
  if cb_id then
    local cb = redis.call('HMGET', group, 'cb_msg', 'cb_group')
    push_follow_up(k + 1, cb_id, cb[1], cb[2], k + 6)
  end
  tell_waiters(waiting, channel, gid)
end

-- A member failed: the group marked failed (by its first failed member), the member
-- counted as ended once (its "x:<id>" field), the state's TTL set when none is left.
local function member_failed(k, member, keep_ms, gid, channel)
  local group, waiting = unpack(keys_from(k, 2), 1, 2)
  if redis.call('EXISTS', group) == 0 then return end
  redis.call('HSETNX', group, 'failed', member)
  if redis.call('HSETNX', group, 'x:' .. member, 1) == 1
      and redis.call('HINCRBY', group, 'left', -1) <= 0 then
    redis.call('PEXPIRE', group, keep_ms)
  end
  tell_waiters(waiting, channel, gid)
end

-- Tell a caller of get() waiting for `id` (if any) that its outcome is there.
local function publish_if_waited(waiting_key, channel, id)
  if redis.call('ZSCORE', waiting_key, id) then
    redis.call('ZREM', waiting_key, id)
    redis.call('PUBLISH', channel, id)
  end
end

-- Apply the entry at E[at] (its keys from KEYS[k] on) for job `id`; returns the indexes
-- after it, and whether a result was kept. `stamp`: time_str(now), made once per call;
-- `waited`: whether anybody waits on this queue (its Q:waiting exists); `kept`: TTL ->
-- the (id, stored) pairs to keep, which keep_results writes once the entries are read;
-- `told`: the ids whose waiters tell_kept tells after that. `sizes`: TTL -> how many
-- entries kept[TTL] holds (shared with the plain results of that TTL, which
-- ack_outcomes appends to the same list).
local function apply_outcome(E, at, k, id, stamp, waiting_key, channel, waited, kept, sizes,
                             told)
  local ttl_ms, record, ops = E[at], E[at + 1], tonumber(E[at + 2])
  local keeps = ttl_ms ~= '0'
  at = at + 3
  if keeps then
    local list, size = kept[ttl_ms], sizes[ttl_ms]
    list[size + 1] = id
    list[size + 2] = stamp .. record
    sizes[ttl_ms] = size + 2
  end
  for _ = 1, ops do
    local kind = E[at]
    if kind == 'push' then
      push_follow_up(k, E[at + 1], E[at + 2])
    elseif kind == 'gpush' then
      push_follow_up(k, E[at + 1], E[at + 2], E[at + 3], k + 4)
    elseif kind == 'member' then
      member_done(k, E[at + 1], E[at + 2], tonumber(E[at + 3]), E[at + 4], E[at + 5])
    else
      member_failed(k, E[at + 1], tonumber(E[at + 2]), E[at + 3], E[at + 4])
    end
    at, k = at + 1 + SIZES[kind][1], k + SIZES[kind][2]
  end
  if keeps and waited then told[#told + 1] = id end
  return at, k, keeps
end

-- The indexes after the entry at E[at], KEYS[k], applied to nothing (a job not owned).
local function skip_outcome(E, at, k)
  local ops = tonumber(E[at + 2])
  at = at + 3
  for _ = 1, ops do
    local size = SIZES[E[at]]
    at, k = at + 1 + size[1], k + size[2]
  end
  return at, k
end

-- The ids that kept a result, newest first, the list cut to INDEX_MAX.
local function index_results(index_key, kept)
  if #kept > 0 then
    call_chunked('LPUSH', index_key, kept)
    redis.call('LTRIM', index_key, 0, INDEX_MAX - 1)
  end
end

-- Keep the pairs gathered in `kept` (TTL in ms -> {id, stored, id, stored, ...}), for each
-- TTL of `ttls` in its slot hash (`slots`: TTL -> key), listed in `registry` until the
-- slot expires. One HSET per slot for a whole batch: a key per result (a SET with its
-- TTL) cost Redis as much again as the rest of a noop job's work (docs/decisions.md).
-- The slot lives a TTL past its last write, so each record at least its TTL.
local function keep_results(ttls, kept, slots, registry, now)
  local now_ms = math.floor(now * 1000)
  local wrote = false
  for _, ttl in ipairs(ttls) do
    local list, slot = kept[ttl], slots[ttl]
    if #list > 0 then
      call_chunked('HSET', slot, list)
      redis.call('PEXPIRE', slot, ttl)
      redis.call('ZADD', registry, now_ms + tonumber(ttl), slot)
      if redis.call('PTTL', registry) < tonumber(ttl) then redis.call('PEXPIRE', registry, ttl) end
      wrote = true
    end
  end
  if wrote then redis.call('ZREMRANGEBYSCORE', registry, '-inf', now_ms) end
end

-- Tell the waiters of `told` once their results are written: a PUBLISH that fails (a
-- user without the channel's right) then fails after the results, never before them.
local function tell_kept(waiting_key, channel, told)
  for i = 1, #told do publish_if_waited(waiting_key, channel, told[i]) end
end

-- The fields of an entries blob (gq.store.outcomes.packed): a MessagePack array whose
-- elements are all str 32 (0xdb, a 4-byte big-endian length, the bytes). One argument
-- for a whole batch: a client's cost per argument was most of what results cost the
-- worker (docs/decisions.md). cmsgpack (every Redis and Valkey) decodes it in C: a
-- results batch cost Redis 10% fewer instructions than the Lua loop below, which a
-- server without cmsgpack (fakeredis) runs.
local function fields_of(blob)
  if cmsgpack then return cmsgpack.unpack(blob) end
  local fields, at, n, size = {}, 6, 0, #blob  -- (after the array's 5-byte head)
  local byte, sub = string.byte, string.sub
  while at <= size do
    local a, b, c, d = byte(blob, at + 1, at + 4)
    local stop = at + 4 + ((a * 256 + b) * 256 + c) * 256 + d
    n = n + 1
    fields[n] = sub(blob, at + 5, stop)
    at = stop + 1
  end
  return fields
end

-- Acknowledge the ids of an entries blob as lib/ack.lua does, and write each owned id's
-- outcome. The blob's fields: the number of ids n, the n ids, a kind per id ("r": a plain
-- result, kept the first TTL below, its entry the record alone; "e": a full entry, as
-- above), the number m of the batch's TTLs, the m TTLs in ms (the plain results' first),
-- then the entries in order. KEYS[k..k+m-1]: the slot of each TTL, in that order (checked
-- before anything is written); the entries' keys follow. K: the in-flight set, data,
-- recovered, cancelled, waiting, results index and slots registry keys. Returns a flag
-- per id (1 acknowledged, 0 not owned: no outcome, its new owner writes it) and the ids
-- acknowledged.
local function ack_outcomes(blob, k, K, channel)
  local E = fields_of(blob)
  local n = tonumber(E[1])
  local m = tonumber(E[n + 3])
  local ttls, slots, kept, sizes = {unpack(E, n + 4, n + 3 + m)}, {}, {}, {}
  if m > 0 then
    local types = {K[7], 'zset'}
    for i = 1, m do
      slots[ttls[i]], kept[ttls[i]], sizes[ttls[i]] = KEYS[k], {}, 0
      types[2 * i + 1], types[2 * i + 2] = KEYS[k], 'hash'
      k = k + 1
    end
    check_types(types)
  end
  local ids = {unpack(E, 2, n + 1)}
  local flags, owned = acknowledge(K[1], K[2], K[3], K[4], ids)
  local acked, indexed = {}, {}
  if owned == 0 then return flags, acked end
  local kinds, at = E[n + 2], n + 4 + m
  local now = server_now()
  local stamp = time_str(now)
  local waited = redis.call('EXISTS', K[5]) == 1
  local byte = string.byte
  local plain_ttl, told = ttls[1], {}
  local plain_kept = kept[plain_ttl]
  -- (counts, not #: each # is a search; the plain results' list may be shared with full
  -- entries of the same TTL, so its count is kept in `sizes`, as apply_outcome's)
  local n_acked, n_indexed = 0, 0
  for i = 1, n do
    local id, plain = ids[i], byte(kinds, i) == 114  -- "r"
    if flags[i] == 1 then
      n_acked = n_acked + 1
      acked[n_acked] = id
      local keeps = plain
      if plain then
        local size = sizes[plain_ttl]
        plain_kept[size + 1] = id
        plain_kept[size + 2] = stamp .. E[at]
        sizes[plain_ttl] = size + 2
        if waited then told[#told + 1] = id end
        at = at + 1
      else
        at, k, keeps = apply_outcome(E, at, k, id, stamp, K[5], channel, waited, kept, sizes,
                                     told)
      end
      if keeps then
        n_indexed = n_indexed + 1
        indexed[n_indexed] = id
      end
    elseif plain then
      at = at + 1
    else
      at, k = skip_outcome(E, at, k)
    end
  end
  keep_results(ttls, kept, slots, K[7], now)
  index_results(K[6], indexed)
  tell_kept(K[5], channel, told)
  return flags, acked
end

-- Write the one outcome entry of job `id` at ARGV[at] (its keys from KEYS[k]: the
-- slot of its TTL when it keeps one, then its follow-ups'), as a kill does: the record
-- kept, the results index and the waiters told. `keys`: waiting, index, slots registry.
local function write_killed_outcome(at, k, keeps_ttl, id, channel, now, keys)
  local waiting, index_key, slots_key = unpack(keys, 1, 3)
  local kept, slots, sizes, told = {}, {}, {}, {}
  if keeps_ttl then kept[keeps_ttl], slots[keeps_ttl], sizes[keeps_ttl] = {}, KEYS[k], 0 end
  local _, _, keeps = apply_outcome(ARGV, at, keeps_ttl and k + 1 or k, id,
    time_str(now), waiting, channel, redis.call('EXISTS', waiting) == 1, kept, sizes, told)
  if keeps then
    keep_results({keeps_ttl}, kept, slots, slots_key, now)
    index_results(index_key, {id})
    tell_kept(waiting, channel, told)
  end
end
