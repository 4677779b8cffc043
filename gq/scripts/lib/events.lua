-- Library: the queue's opt-in stream of job events (gq/events.py, docs/operating.md).
-- A script that includes it takes two more keys, last: the flow settings hash and the
-- events stream (KEYS[#KEYS - 1], KEYS[#KEYS]; same hash tag as the queue). The stream
-- is on while the hash's field events_maxlen holds a cap above 0: one HGET per call
-- when it is off, nothing else. Each event is an XADD ... MAXLEN ~ cap of the fields
-- event, job, task, attempts (the same four first on every entry, so the stream's
-- listpacks store their names once) and the event's extras. The task and the attempts
-- come from the message: its top-level map is walked for Attempt, Error and Data, whose
-- task envelope starts with the task's name (gq/tasks/envelope.py); "" when not found.
local function events_key(k) return KEYS[k] end
local EVENTS_FLOW, EVENTS_KEY = events_key(#KEYS - 1), events_key(#KEYS)
local events_cap = nil

local function events_maxlen()
  if events_cap == nil then
    events_cap = tonumber(redis.call('HGET', EVENTS_FLOW, 'events_maxlen') or '') or 0
  end
  return events_cap
end

-- A MessagePack string, bin or integer at `at`: (value, next position) or nil.
local function mp_value(s, at)
  local b = string.byte(s, at)
  if not b then return nil end
  if b < 0x80 then return b, at + 1 end
  if b >= 0xa0 and b <= 0xbf then return string.sub(s, at + 1, at + b - 0xa0), at + 1 + b - 0xa0 end
  local width = ({[0xd9] = 1, [0xc4] = 1, [0xda] = 2, [0xc5] = 2, [0xdb] = 4, [0xc6] = 4})[b]
  if width then
    local n = 0
    for i = 1, width do n = n * 256 + string.byte(s, at + i) end
    return string.sub(s, at + 1 + width, at + width + n), at + 1 + width + n
  end
  local int = ({[0xcc] = 1, [0xcd] = 2, [0xce] = 4, [0xcf] = 8, [0xd0] = 1, [0xd1] = 2,
                [0xd2] = 4, [0xd3] = 8})[b]
  if int then
    local n = 0
    for i = 1, int do n = n * 256 + string.byte(s, at + i) end
    return n, at + 1 + int  -- (attempts are never negative; a signed one reads as itself)
  end
  local float = ({[0xca] = 4, [0xcb] = 8})[b]
  if float then return false, at + 1 + float end
  return nil
end

-- The task name at the head of a task envelope (MAGIC, a map header, "task", the name).
local function envelope_task(data)
  if type(data) ~= 'string' or string.sub(data, 1, 4) ~= '\0gqt' then return '' end
  if string.sub(data, 6, 10) ~= '\164task' then return '' end
  local name = mp_value(data, 11)
  return type(name) == 'string' and name or ''
end

-- (task, attempts, error) of a message; "" for what it does not say.
local function message_facts(message)
  if type(message) ~= 'string' then return '', '', nil end
  local head = string.byte(message, 1)
  if not head or head < 0x80 or head > 0x8f then return '', '', nil end
  local at, facts = 2, {}
  for _ = 1, head - 0x80 do
    local key, value
    key, at = mp_value(message, at)
    if not key then break end
    value, at = mp_value(message, at)
    if value == nil then break end
    facts[key] = value
  end
  return envelope_task(facts.Data), tostring(facts.Attempt or ''), facts.Error
end

-- XADD one event; `extra` is a flat list of more field, value pairs.
local function event_write(event, id, task, attempts, err, extra)
  local fields = {'XADD', EVENTS_KEY, 'MAXLEN', '~', events_cap, '*', 'event', event,
                  'job', id, 'task', task, 'attempts', attempts}
  if err then fields[#fields + 1] = 'error'; fields[#fields + 1] = err end
  for i = 1, #(extra or {}) do fields[#fields + 1] = extra[i] end
  redis.call(unpack(fields, 1, #fields))
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
-- `blob`: "" or an entries blob (lib/outcome.lua), whose ids are acknowledged too.
local function events_acked(inflight_key, data_key, blob, ids)
  if events_maxlen() <= 0 then return end
  local all = {}
  if blob ~= '' then
    local E = fields_of(blob)
    for i = 2, tonumber(E[1]) + 1 do all[#all + 1] = E[i] end
  end
  for i = 1, #ids do all[#all + 1] = ids[i] end
  for i = 1, #all do
    if redis.call('SISMEMBER', inflight_key, all[i]) == 1 then
      event_add('done', all[i], redis.call('HGET', data_key, all[i]))
    end
  end
end
