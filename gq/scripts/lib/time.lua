-- Library: the Redis server's clock, so that no worker's clock decides liveness or due times.
-- Redis < 5 needs effects replication before a write that follows TIME; newer servers
-- always replicate effects and keep the call as a no-op.
if redis.replicate_commands then redis.replicate_commands() end

local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- A delayed enqueue tells the consumers' schedulers its earliest due time (gq.worker.due)
-- on the scheduled set's name and ':due': a channel, not a key (Cluster routes no PUBLISH
-- by slot). pcall: a user whose ACL refuses the channel still enqueues, and its workers
-- fall back to their poll.
local function announce_due(scheduled_key, at)
  if at ~= nil then redis.pcall('PUBLISH', scheduled_key .. ':due', string.format('%.6f', at)) end
end
