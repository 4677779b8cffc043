-- history_page: one chunk of a queue's history of finished jobs (gq/history.py), from
-- the entry a reader wants on, placed and read with the count of entries ever written in
-- one call, so that the numbering is exact (lib/history.lua: the tail is that count's
-- last entry, entry number `written - 1`). A script, not a MULTI: the documented ACL
-- rule grants scripts, not transactions.
-- KEYS[1] the history's settings hash   KEYS[2] the history (a list)
-- ARGV[1] the number of the newest entry wanted ("": the newest there is)
-- ARGV[2] how many entries to read at most
-- Returns {the number of the chunk's newest entry, the entries from the oldest to the
-- newest}: fewer than asked once the head is reached.
local size = tonumber(ARGV[2])
local written = tonumber(redis.call('HGET', KEYS[1], 'written') or '0')
local newest = written - 1
if ARGV[1] ~= '' then newest = math.min(newest, tonumber(ARGV[1])) end
local skip = written - 1 - newest
return {newest, redis.call('LRANGE', KEYS[2], -(skip + size), -(skip + 1))}
