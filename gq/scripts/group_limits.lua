-- include: chunk, flow, groups
-- group limits: set or clear limits of every group (ARGV[1] "") or of one group's own, then
-- bring back to the ring up to 1000 groups parked at their concurrency limit (all of them
-- for every group's limits, the one group's otherwise: a limit may have grown) and raise
-- the signal. The caller calls again while a full page came back.
-- KEYS[1] signal list   KEYS[2..8] the group keys
-- ARGV[1] the group, or "" for every group's   ARGV[2..] name, value pairs among
-- "concurrency", "rate", "period" (ms); an empty value clears the setting
-- Returns the number of groups brought back.
local G = group_keys(2)
local group = ARGV[1]
local suffix = group == '' and '' or '\n' .. group
for i = 2, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', G.limits, ARGV[i] .. suffix)
  else
    redis.call('HSET', G.limits, ARGV[i] .. suffix, ARGV[i + 1])
  end
  if ARGV[i] == 'rate' and group ~= '' then redis.call('HDEL', G.state, 'tat\n' .. group) end
end
-- "own": some group has limits of its own, so a fetch reads them (else it reads only
-- every group's): the hash then holds more than every group's settings.
local defaults = 0
for _, name in ipairs({'concurrency', 'rate', 'period'}) do
  defaults = defaults + redis.call('HEXISTS', G.limits, name)
end
redis.call('HDEL', G.limits, 'own')
if redis.call('HLEN', G.limits) > defaults then redis.call('HSET', G.limits, 'own', '1') end
local parked
if group == '' then
  parked = redis.call('ZRANGEBYSCORE', G.parked, GROUP_FULL, GROUP_FULL, 'LIMIT', 0, 1000)
elseif tonumber(redis.call('ZSCORE', G.parked, group)) == GROUP_FULL then
  parked = {group}
else
  parked = {}
end
for _, name in ipairs(parked) do
  redis.call('ZREM', G.parked, name)
  if group_waiting(G, name) > 0 then group_ready(G, name) end
end
raise_signal(KEYS[1])
return #parked
