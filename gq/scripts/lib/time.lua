-- Library: the Redis server's clock, so that no worker's clock decides liveness or due times.
-- Redis < 5 needs effects replication before a write that follows TIME; newer servers
-- always replicate effects and keep the call as a no-op.
if redis.replicate_commands then redis.replicate_commands() end

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
