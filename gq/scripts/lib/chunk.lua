-- Library: variadic commands over long lists. Lua 5.1's unpack fails past about 8000
-- values ("too many results to unpack"), so lists go out in bounded chunks.
local CHUNK = 1000

local function call_chunked(command, key, items)
  for i = 1, #items, CHUNK do
    redis.call(command, key, unpack(items, i, math.min(i + CHUNK - 1, #items)))
  end
end

local function hmget_chunked(key, ids)
  -- One chunk (a fetch's batch): the reply is the table, not copied value by value.
  if #ids > 0 and #ids <= CHUNK then return redis.call('HMGET', key, unpack(ids)) end
  local values = {}
  for i = 1, #ids, CHUNK do
    local part = redis.call('HMGET', key, unpack(ids, i, math.min(i + CHUNK - 1, #ids)))
    -- HMGET gives false, not nil, for a missing field, so #part counts every id.
    for j = 1, #part do values[i + j - 1] = part[j] end
  end
  return values
end

-- "The queue may have jobs": exactly one "1" in the signal list, whoever writes it.
local function raise_signal(signal_key)
  redis.call('DEL', signal_key)
  redis.call('LPUSH', signal_key, '1')
end
