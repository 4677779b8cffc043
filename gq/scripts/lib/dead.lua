-- Library: keep the dead set bounded. Trimmed jobs lose their message too, which frees
-- their ids for new jobs. At most TRIM_BATCH ids go per call, so every call stays short;
-- each kill adds one job and may trim many, so the set converges to its bounds.
local TRIM_BATCH = 100

local function drop_dead(dead_key, data_key, ids)
  if #ids > 0 then
    redis.call('ZREM', dead_key, unpack(ids))
    redis.call('HDEL', data_key, unpack(ids))
  end
end

local function trim_dead(dead_key, data_key, now, max_jobs, max_age)
  drop_dead(dead_key, data_key,
    redis.call('ZRANGEBYSCORE', dead_key, '-inf', now - max_age, 'LIMIT', 0, TRIM_BATCH))
  local excess = redis.call('ZCARD', dead_key) - max_jobs
  if excess > 0 then
    drop_dead(dead_key, data_key,
      redis.call('ZRANGE', dead_key, 0, math.min(excess, TRIM_BATCH) - 1))
  end
end

-- Append gq's "Error" key to a MessagePack map without a MessagePack library (none is
-- guaranteed in every Redis-compatible server). Only fixmaps of fewer than 15 entries
-- are touched, which covers every message gq and curlyq write; anything else is kept
-- as it is. A map that already has "Error" gets a second one: MessagePack readers
-- (msgpack-python, vmihailenco/msgpack) keep the last value of a repeated key.
local function msgpack_str(s)
  s = string.sub(s, 1, 255)
  if #s < 32 then return string.char(0xa0 + #s) .. s end
  return string.char(0xd9, #s) .. s
end

local function with_error(message, reason)
  if not message then return message end
  local head = string.byte(message, 1)
  if not head or head < 0x80 or head >= 0x8f then return message end
  return string.char(head + 1) .. string.sub(message, 2) .. msgpack_str('Error') .. msgpack_str(reason)
end
