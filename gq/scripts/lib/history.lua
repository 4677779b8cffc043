-- Library: the history of finished jobs (docs/operating.md), written by the scripts that
-- end a job (ack.lua, ack_results.lua, fetch.lua's acks, kill.lua, cancel.lua) for the
-- ids whose change happened, in the same call: no entry for an ack of a job not owned.
-- Include it before lib/ack.lua (acknowledge writes the entries of the jobs it acks).
-- curlyq never reads these keys: Q:finished (sorted set: entry -> when the job ended,
-- server ms) and Q:finished:settings (hash: "max" entries, "ttl" seconds; absent: the
-- defaults below; 0 in either: no history). Both are passed as the script's LAST two
-- keys (settings, then history); a caller that passes other keys last writes none.
-- An entry: its state ("d" done, "x" dead, "c" cancelled before it ran, "i" cancelled
-- while it ran: interrupted), the id's length (2 bytes,
-- big-endian), the id, then the job's message as it was stored (curlyq's MessagePack:
-- the task envelope, its Attempt, a dead job's Error), or "" past MESSAGE_MAX bytes.
-- The message is read from the data hash before the script deletes it: the worker sends
-- nothing more with its acks (docs/decisions.md).
local HISTORY_MAX, HISTORY_TTL = 10000, 86400
local HISTORY_TRIM = 1000  -- entries removed per call at most: a trim never blocks Redis
local HISTORY_MESSAGE_MAX = 4096
local history = false  -- {key, settings, max, ttl} while this script writes a history

-- Open the queue's history from the script's last two keys: false when they are not
-- history keys or it is turned off.
local function history_open()
  local settings, key = KEYS[#KEYS - 1], KEYS[#KEYS]
  if #KEYS < 2 or string.sub(key, -9) ~= ':finished' or string.sub(settings, -18) ~=
      ':finished:settings' or string.sub(settings, 1, #key) ~= key then
    return false
  end
  check_types({key, 'zset', settings, 'hash'})
  local found = redis.call('HMGET', settings, 'max', 'ttl')
  local max, ttl = tonumber(found[1]) or HISTORY_MAX, tonumber(found[2]) or HISTORY_TTL
  if max <= 0 or ttl <= 0 then return false end
  history = {key = key, max = max, ttl = ttl}
  return history
end

local function history_entry(state, id, message)
  if not message or #message > HISTORY_MESSAGE_MAX then message = '' end
  return state .. string.char(math.floor(#id / 256) % 256, #id % 256) .. id .. message
end

-- Cut the history to its bounds, oldest first, at most HISTORY_TRIM entries per call
-- (a backlog of trimming, after `max` was lowered, goes in the next calls).
local function history_trim(now_ms)
  local key = history.key
  local over = redis.call('ZCARD', key) - history.max
  local old = redis.call('ZCOUNT', key, '-inf', now_ms - history.ttl * 1000)
  local cut = math.min(math.max(over, old), HISTORY_TRIM)
  if cut > 0 then
    -- By the score of the last one cut (the ACL rule of docs/deployment.md allows
    -- ZREMRANGEBYSCORE, not ZREMRANGEBYRANK): entries that ended in the same ms go too.
    local edge = redis.call('ZRANGE', key, cut - 1, cut - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYSCORE', key, '-inf', edge[2])
  end
  redis.call('PEXPIRE', key, history.ttl * 1000)
end

-- Record the jobs `ids` (owned: their change happened) as ended in `state`, their
-- messages `messages` (one per id; nil: read from `data_key` before it is deleted).
-- Cancel requests in `cancelled_key` turn a "d" into "i": the worker acks a job it
-- interrupted with JobCancelled like any other.
local function history_record(state, ids, data_key, messages, cancelled_key)
  if not history or #ids == 0 then return end
  messages = messages or hmget_chunked(data_key, ids)
  local asked = cancelled_key and redis.call('EXISTS', cancelled_key) == 1
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local args, n = {}, 0
  for i = 1, #ids do
    local ended = state
    if asked and redis.call('ZSCORE', cancelled_key, ids[i]) then ended = 'i' end
    args[n + 1], args[n + 2] = now_ms, history_entry(ended, ids[i], messages[i])
    n = n + 2
  end
  call_chunked('ZADD', history.key, args)
  history_trim(now_ms)
end
