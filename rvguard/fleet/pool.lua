-- rvguard: the shared floor-credit pool, one atomic call per arrival (or per heartbeat: join only).
--
-- KEYS[1]  the (tenant, window) hash        KEYS[2]  the fence marker (no expiry)
-- ARGV[1]  replica id                       ARGV[2]  its reserve R_r (static share of B, credits)
-- ARGV[3]  R_total = sum of all reserves    ARGV[4]  the floor B
-- ARGV[5]  the arrival's weight w           ARGV[6]  window index k
-- ARGV[7]  time to live of KEYS[1], ms      ARGV[8]  credit this replica spent statically in k
-- ARGV[9]  arrival weight it decided statically in k
-- ARGV[10] '1' for an arrival, '0' to join only (the heartbeat)
-- ARGV[11] '1' to release this replica's reserve; '0' in the replica's start window, where its
--          previous life may have spent that reserve alone without reporting it
--
-- Returns {verdict, arrived, spent, cap} as strings; verdict is
--   floor   granted: the arrival is among the first B in pool order and fits the pool
--   excess  not entitled: the window's arrivals already passed B
--   held    entitled, but the credit left is held as reserves of replicas not yet joined
--   joined  (join only) this replica's reserve is pooled
--   fenced  the pool's past is unknown (the marker was missing: a fresh or restarted store);
--           windows up to k + 1 are fenced and nothing was changed.
--
-- Invariant (every window): spent + sum of reserves still held <= B, so whatever the replicas
-- not yet joined spend on their own (at most their reserves) keeps the fleet within B.
local k = tonumber(ARGV[6])
local fence = redis.call('GET', KEYS[2])
if not fence then
  redis.call('SET', KEYS[2], k + 1)
  return {'fenced', '0', '0', '0'}
end
if k <= tonumber(fence) then
  return {'fenced', '0', '0', '0'}
end

local h, me = KEYS[1], ARGV[1]
if ARGV[11] == '1' and redis.call('HSETNX', h, 'rel:' .. me, ARGV[2]) == 1 then
  redis.call('HINCRBYFLOAT', h, 'released', ARGV[2])
end

-- what this replica spent on its own before joining enters the pool once (re-reports add only the rest)
local function report(field, total, value)
  local old = tonumber(redis.call('HGET', h, field) or '0')
  local new = tonumber(value)
  if new > old then
    redis.call('HSET', h, field, value)
    redis.call('HINCRBYFLOAT', h, total, new - old)
  end
end
report('ss:' .. me, 'spent', ARGV[8])
report('sa:' .. me, 'arrived', ARGV[9])

local B, w = tonumber(ARGV[4]), tonumber(ARGV[5])
local spent = tonumber(redis.call('HGET', h, 'spent') or '0')
local arrived = tonumber(redis.call('HGET', h, 'arrived') or '0')
local cap = B - (tonumber(ARGV[3]) - tonumber(redis.call('HGET', h, 'released') or '0'))
local verdict = 'joined'
if ARGV[10] == '1' then
  arrived = tonumber(redis.call('HINCRBYFLOAT', h, 'arrived', ARGV[5]))
  if arrived > B then
    verdict = 'excess'
  elseif spent + w <= cap then
    spent = tonumber(redis.call('HINCRBYFLOAT', h, 'spent', ARGV[5]))
    verdict = 'floor'
  else
    verdict = 'held'
  end
end
redis.call('PEXPIRE', h, ARGV[7])
return {verdict, tostring(arrived), tostring(spent), tostring(cap)}
