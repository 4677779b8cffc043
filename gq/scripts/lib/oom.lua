-- Library: let a queue-draining script run at maxmemory. With maxmemory-policy
-- noeviction, Redis refuses a script (one without flags) when its first write may grow
-- memory; refusing fetch, enqueue_due or the heartbeat would stop the very workers that
-- free memory. A no-op write first (removing a member that is never there) counts as
-- that first write and lets the rest through. Redis 7's `#!lua flags=allow-oom` would do
-- the same, but Redis 6.2 rejects it.
local function pass_at_maxmemory(command, key)
  redis.call(command, key, '\0gq-oom-pass')
end
