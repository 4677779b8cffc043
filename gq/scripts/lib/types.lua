-- Library: refuse before the first write when a key has the wrong type. Redis does not roll
-- a script back when a command fails, so a WRONGTYPE half way (after an SREM, an HSETNX or
-- an LTRIM) would leave a job nowhere, or its id blocked forever.
local function check_type(key, wanted)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t.ok end
  if t ~= 'none' and t ~= wanted then
    error('GQWRONGTYPE ' .. key .. ' is a ' .. t .. ', not a ' .. wanted)
  end
end

-- check_types({key1, 'set', key2, 'hash', ...})
local function check_types(expected)
  for i = 1, #expected, 2 do check_type(expected[i], expected[i + 1]) end
end
