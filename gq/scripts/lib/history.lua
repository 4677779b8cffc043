-- Library: the history of finished jobs (docs/operating.md), written by the scripts that
-- end a job (ack.lua, ack_results.lua, fetch.lua's acks, kill.lua, cancel.lua) for the
-- ids whose change happened, in the same call: no entry for an ack of a job not owned.
-- Include it before lib/ack.lua (acknowledge writes the entries of the jobs it acks).
-- curlyq never reads these keys: Q:finished (a list, oldest first: one entry per job
-- that ended) and Q:finished:settings (hash: "max" entries, "ttl" seconds, both the
-- operator's (absent: the defaults below; 0 in either: no history), and "written", the
-- entries ever written: a reader numbers the entry k places from the tail `written - 1
-- - k` for its cursor, as both change in the same call and trims cut only the head).
-- Both are passed just before the events' two keys, which are the script's last
-- (lib/events.lua): settings, history, flow, events; a caller that passes other keys
-- there writes none. A list, not a sorted set (which took 40% more memory per entry),
-- pushed at its tail and trimmed at its head (docs/decisions.md).
-- An entry: when it ended (server ms, 13 digits), its state ("d" done, "x" dead, "c"
-- cancelled before it ran, "i" cancelled while it ran: interrupted), the id's length
-- (2 bytes), the id, then the job's message as it was
-- stored (curlyq's MessagePack: the task envelope, its Attempt, a dead job's Error), or
-- "" past HISTORY_MESSAGE_MAX bytes. The message is read from the data hash before the
-- script deletes it: the worker sends nothing more with its acks (docs/decisions.md).
local HISTORY_MAX, HISTORY_TTL = 10000, 86400
local HISTORY_TRIM = 1000  -- entries removed per call at most: a trim never blocks Redis
local HISTORY_MESSAGE_MAX = 4096
local HISTORY_AGED = 100  -- entries read from the tail per call to find those too old
local history = false  -- {key, settings, max, ttl} while this script writes a history

-- Open the queue's history from the two keys before the events' (the last two): false when they are not
-- history keys or it is turned off.
local function history_open()
  local settings, key = KEYS[#KEYS - 3], KEYS[#KEYS - 2]
  if #KEYS < 4 or string.sub(key, -9) ~= ':finished' or string.sub(settings, -18) ~=
      ':finished:settings' or string.sub(settings, 1, #key) ~= key then
    return false
  end
  check_types({key, 'list', settings, 'hash'})
  local found = redis.call('HMGET', settings, 'max', 'ttl')
  local max, ttl = tonumber(found[1]) or HISTORY_MAX, tonumber(found[2]) or HISTORY_TTL
  if max <= 0 or ttl <= 0 then return false end
  history = {key = key, settings = settings, max = max, ttl = ttl}
  return history
end

local function history_time(entry)
  return tonumber(string.sub(entry, 1, 13))
end

-- Entries older than the TTL, counted from the head (at most HISTORY_AGED).
local function history_aged(cutoff)
  local oldest = redis.call('LINDEX', history.key, 0)
  if not oldest or history_time(oldest) >= cutoff then return 0 end
  local head = redis.call('LRANGE', history.key, 0, HISTORY_AGED - 1)
  local old = 0
  for i = 1, #head do
    if history_time(head[i]) >= cutoff then break end
    old = old + 1
  end
  return old
end

-- Cut the history to its bounds, oldest first, at most HISTORY_TRIM entries per call
-- (a backlog of trimming, after `max` was lowered, goes in the next calls).
local function history_trim(size, now_ms)
  local over = size - history.max
  local cut = math.min(math.max(over, history_aged(now_ms - history.ttl * 1000)), HISTORY_TRIM)
  if cut > 0 then redis.call('LTRIM', history.key, cut, -1) end
  redis.call('PEXPIRE', history.key, history.ttl * 1000)
end

-- Record the jobs `ids` (owned: their change happened) as ended in `state`, their
-- messages read from `data_key` (before the caller deletes them). Cancel requests in
-- `cancelled_key` turn a "d" into "i": the worker acks a job it interrupted with
-- JobCancelled like any other.
local function history_record(state, ids, data_key, cancelled_key)
  if not history or #ids == 0 then return end
  local messages = hmget_chunked(data_key, ids)
  local asked = cancelled_key and redis.call('EXISTS', cancelled_key) == 1
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local stamp = string.format('%013d', now_ms)
  redis.call('HINCRBY', history.settings, 'written', #ids)
  -- (no number in an entry: a reader counts it from `written`; formatting one per entry
  -- was a fifth of what the history cost Redis. The id's length as 2 bytes, made once
  -- per length a call meets: every id of a batch is a uuid's 36, mostly.)
  local entries, lengths, char = {}, {}, string.char
  for i = 1, #ids do
    local id, message, ended = ids[i], messages[i], state
    if asked and redis.call('ZSCORE', cancelled_key, id) then ended = 'i' end
    if not message or #message > HISTORY_MESSAGE_MAX then message = '' end
    local size = #id
    local length = lengths[size]
    if not length then
      length = char(math.floor(size / 256) % 256, size % 256)
      lengths[size] = length
    end
    entries[i] = stamp .. ended .. length .. id .. message
  end
  -- (at most 1000 ids: every caller's batch is bounded so)
  history_trim(redis.call('RPUSH', history.key, unpack(entries, 1, #entries)), now_ms)
end
