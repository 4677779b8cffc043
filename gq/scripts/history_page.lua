-- history_page: one chunk of a queue's history of finished jobs (gq/history.py), read
-- with the count of entries ever written in one call, so that the reader numbers each
-- entry exactly (lib/history.lua: the tail is that count's last entry). A script, not a
-- MULTI: the documented ACL rule grants scripts, not transactions.
-- KEYS[1] the history's settings hash   KEYS[2] the history (a list)
-- ARGV[1] how many entries from the tail to skip   ARGV[2] how many to read
-- Returns {written, the entries from the oldest to the newest of the chunk}.
local skip, size = tonumber(ARGV[1]), tonumber(ARGV[2])
local written = tonumber(redis.call('HGET', KEYS[1], 'written') or '0')
return {written, redis.call('LRANGE', KEYS[2], -(skip + size), -(skip + 1))}
