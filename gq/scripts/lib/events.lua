-- Library: the queue's opt-in stream of job events (gq/events.py, docs/operating.md).
-- A script that includes it takes two more keys, last: the flow settings hash and the
-- events stream (KEYS[#KEYS - 1], KEYS[#KEYS]; same hash tag as the queue). The stream
-- is on while the hash's field events_maxlen holds a cap above 0: one HGET per call
-- when it is off, nothing else. Each event is an XADD ... MAXLEN ~ cap of the fields
-- event, job, task, attempts (the same four first on every entry, so the stream's
-- listpacks store their names once) and the event's extras. The task and the attempts
-- come from the message's Attempt, Error and Data, whose task envelope starts with the
-- task's name (gq/tasks/envelope.py); "" when not found.
local function events_key(k) return KEYS[k] end
local EVENTS_FLOW, EVENTS_KEY = events_key(#KEYS - 1), events_key(#KEYS)
local events_cap, events_cap_text = nil, nil

-- The cap, 0 while events are off (read once per call; kept as text too, for XADD: a
-- number argument is formatted by printf at each call, which cost as much as the walk).
local function events_maxlen()
  if events_cap == nil then
    events_cap_text = redis.call('HGET', EVENTS_FLOW, 'events_maxlen') or ''
    events_cap = tonumber(events_cap_text) or 0
  end
  return events_cap
end

-- The MessagePack headers the walk reads (anything else ends it): the width of a str or
-- bin's length, of an unsigned or signed integer, of a float.
local MP_SIZED = {[0xd9] = 1, [0xc4] = 1, [0xda] = 2, [0xc5] = 2, [0xdb] = 4, [0xc6] = 4}
local MP_INT = {[0xcc] = 1, [0xcd] = 2, [0xce] = 4, [0xcf] = 8, [0xd0] = 1, [0xd1] = 2,
                [0xd2] = 4, [0xd3] = 8}
local MP_FLOAT = {[0xca] = 4, [0xcb] = 8}
local byte, sub, find = string.byte, string.sub, string.find

local function mp_uint(s, at, width)
  local n = 0
  for i = 1, width do n = n * 256 + byte(s, at + i) end
  return n
end

-- The value at `at`, not copied: (kind "s" (str or bin) or "i" or "f", its payload's
-- position or the integer, its length, the next position), or nil.
local function mp_next(s, at)
  local b = byte(s, at)
  if not b then return nil end
  if b < 0x80 then return 'i', b, 0, at + 1 end
  if b >= 0xa0 and b <= 0xbf then return 's', at + 1, b - 0xa0, at + 1 + b - 0xa0 end
  local width = MP_SIZED[b]
  if width then
    local n = mp_uint(s, at, width)
    return 's', at + 1 + width, n, at + 1 + width + n
  end
  width = MP_INT[b]
  if width then return 'i', mp_uint(s, at, width), 0, at + 1 + width end
  width = MP_FLOAT[b]
  if width then return 'f', 0, 0, at + 1 + width end
  return nil
end

-- The task name at the head of a task envelope at `at` (MAGIC, a map header, "task",
-- the name: gq/tasks/envelope.py writes "task" first).
local function envelope_task(s, at)
  if sub(s, at, at + 3) ~= '\0gqt' or sub(s, at + 5, at + 9) ~= '\164task' then return '' end
  local kind, from, n = mp_next(s, at + 10)
  if kind ~= 's' then return '' end
  return sub(s, from, from + n - 1)
end

-- (task, attempts, error) of a message; "" (nil for the error) for what it does not say.
-- Plain finds of the keys (C speed; the Lua walk of the map cost five times more): gq and
-- curlyq write ID, Data, then Attempt (and gq's ReadyAt, Error), so Attempt and Error are
-- looked for past Data's payload, where a job's own bytes cannot fool the search.
local function message_facts(message)
  if type(message) ~= 'string' then return '', '', nil end
  local d = find(message, '\164Data', 1, true)
  if not d then return '', '', nil end
  local kind, from, n, after = mp_next(message, d + 5)
  if kind ~= 's' then return '', '', nil end
  local task, attempts, err = envelope_task(message, from), '', nil
  local a = find(message, '\167Attempt', after, true)
  if a then
    local akind, value = mp_next(message, a + 8)
    if akind == 'i' then attempts = value end
  end
  local e = find(message, '\165Error', after, true)
  if e then
    local ekind, efrom, en = mp_next(message, e + 6)
    if ekind == 's' then err = sub(message, efrom, efrom + en - 1) end
  end
  return task, attempts, err
end

-- The attempts as text, each number formatted once per call (most batches share one).
local attempts_text = {}

local function as_attempts(n)
  if n == '' then return '' end
  local text = attempts_text[n]
  if not text then text = tostring(n); attempts_text[n] = text end
  return text
end

-- XADD one event; `extra` is a flat list of more field, value pairs. The common events
-- (no error, no extra) are one direct call: building the arguments' table cost more.
-- pcall: the event comes after the change it announces has begun (an SREM, an HSETNX),
-- and a refused XADD (the key of another type, the server at maxmemory) must not stop
-- the script half way: the job's change stands, its event is lost.
local function event_write(event, id, task, attempts, err, extra)
  attempts = as_attempts(attempts)
  if not err and not extra then
    redis.pcall('XADD', EVENTS_KEY, 'MAXLEN', '~', events_cap_text, '*', 'event', event,
                'job', id, 'task', task, 'attempts', attempts)
    return
  end
  local fields = {'XADD', EVENTS_KEY, 'MAXLEN', '~', events_cap_text, '*', 'event', event,
                  'job', id, 'task', task, 'attempts', attempts}
  if err then fields[#fields + 1] = 'error'; fields[#fields + 1] = err end
  for i = 1, #(extra or {}) do fields[#fields + 1] = extra[i] end
  redis.pcall(unpack(fields, 1, #fields))
end

local function event_add(event, id, message, extra)
  local task, attempts, err = message_facts(message)
  event_write(event, id, task, attempts, err, extra)
end

-- One event for job `id`: its message given, or read from `data_key` when "" or nil.
local function event_one(event, id, message, data_key, extra)
  if events_maxlen() <= 0 then return end
  if (message == nil or message == '') and data_key then
    message = redis.call('HGET', data_key, id)
  end
  event_add(event, id, message, extra)
end

-- An event per stored job of a producer's call: results[i] == 1 marks the i-th job of
-- args, whose id is at first + (i - 1) * stride and its message just after.
local function events_stored(event, results, args, first, stride)
  if events_maxlen() <= 0 then return end
  for i = 1, #results do
    local at = first + (i - 1) * stride
    if results[i] == 1 then event_add(event, args[at], args[at + 1]) end
  end
end

-- "started" for each (id, message) pair of a fetch's reply, from position `first`.
local function events_taken(reply, first)
  if events_maxlen() <= 0 then return end
  for i = first, #reply, 2 do event_add('started', reply[i], reply[i + 1]) end
end

-- "done" for each id this consumer owns, announced just before the acknowledgement
-- deletes the messages (the script is atomic: the acks that follow are exactly these).
-- `blob`: "" or an entries blob (lib/outcome.lua), whose ids are acknowledged too; then
-- ids[first..] (ARGV as it is: no copy while events are off). One SMISMEMBER and one
-- HMGET for the batch (at most 1000 ids, below unpack's limit).
local function events_acked(inflight_key, data_key, blob, ids, first)
  if events_maxlen() <= 0 then return end
  local all = {}
  if blob ~= '' then
    local E = fields_of(blob)
    for i = 2, tonumber(E[1]) + 1 do all[#all + 1] = E[i] end
  end
  for i = first, #ids do all[#all + 1] = ids[i] end
  if #all == 0 then return end
  local owned = redis.call('SMISMEMBER', inflight_key, unpack(all, 1, #all))
  local messages = redis.call('HMGET', data_key, unpack(all, 1, #all))
  for i = 1, #all do
    if owned[i] == 1 then event_add('done', all[i], messages[i]) end
  end
end
