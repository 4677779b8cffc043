-- Library: acknowledge finished jobs (ack.lua, and the acks that ride on fetch.lua).
-- For each id this consumer owns: remove it from its in-flight set and delete its message,
-- its recovery count and any cancel request. Returns one flag per id (1 acknowledged, 0 not
-- owned) and how many were. Needs lib/history.lua (a script that opened none writes none).
local function acknowledge(inflight_key, data_key, recovered_key, cancelled_key, ids)
  local flags, owned = {}, {}
  for i = 1, #ids do
    if redis.call('SREM', inflight_key, ids[i]) == 1 then
      owned[#owned + 1] = ids[i]
      flags[i] = 1
    else
      flags[i] = 0
    end
  end
  -- One HDEL per hash for the whole batch (at most 1000 ids, well below unpack's limit).
  if #owned > 0 then
    history_record('d', owned, data_key, cancelled_key)  -- (lib/history.lua)
    redis.call('HDEL', data_key, unpack(owned, 1, #owned))
    redis.call('HDEL', recovered_key, unpack(owned, 1, #owned))
    if redis.call('EXISTS', cancelled_key) == 1 then
      redis.call('ZREM', cancelled_key, unpack(owned, 1, #owned))
    end
  end
  return flags, #owned
end
