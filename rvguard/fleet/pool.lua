-- rvguard: the shared floor-credit pool, one atomic call per arrival (or per heartbeat: join only).
--
-- KEYS[1]  the (tenant, window) hash        KEYS[2]  the fence marker (no expiry)
-- ARGV[1]  replica id                       ARGV[2]  its reserve R_r (static share of B, credits)
-- ARGV[3]  R_total = sum of all reserves    ARGV[4]  the floor B
-- ARGV[5]  the arrival's weight w           ARGV[6]  window index k
-- ARGV[7]  time to live of KEYS[1], ms      ARGV[8]  credit this replica spent alone in k (so far)
-- ARGV[9]  arrival weight it decided alone in k
-- ARGV[10] '1' for an arrival, '0' to join only (the heartbeat)
-- ARGV[11] '1' to confirm: the replica has had an answer from this pool in k, so it spends nothing
--          alone in k any more and ARGV[8] is final; only then is its reserve released. '0' otherwise:
--          a call whose answer is lost (or that runs late, after a paused store resumes) releases
--          nothing, so its replica may spend its reserve alone after a time-out.
-- ARGV[12] the last window a missing fence marker fences: the window holding the call's send time
--          plus the time-out, twice the skew bound and the lead (a grant the lost state held was
--          made by then); at least k - 1
-- KEYS[3..] the name-lease keys of the other replicas, ARGV[13..] their ids and reserves in pairs,
--          in the same order: a replica whose lease key is gone (lapsed) and that has not confirmed k
--          has its reserve released in k for good (it spends nothing alone once its lease lapsed,
--          and after it rejoins it treats the window it rejoined in as a start window).
--
-- Returns {verdict, arrived, spent, cap} as strings; verdict is
--   floor    granted: the arrival is among the first B in pool order and fits the pool
--   excess   not entitled: the window's arrivals already passed B
--   held     entitled, but the credit left is held as reserves of replicas not yet confirmed
--   joined   (join only) the call was recorded
--   fenced   the pool's past is unknown (the marker was missing: a fresh or restarted store);
--            windows up to ARGV[12] are fenced and nothing was changed.
--   invalid  the arguments or the stored values are impossible (e.g. forged negative counts):
--            nothing was changed; the 4th field names the field.
--
-- Invariant (every window): spent + sum over unconfirmed replicas r of (R_r - ss_r) <= B, where
-- ss_r is what r reported spending alone; kept as spent + (R_total - released) <= B.
local k = tonumber(ARGV[6])
local fence = redis.call('GET', KEYS[2])
if not fence then
  redis.call('SET', KEYS[2], math.max(tonumber(ARGV[12]) or (k + 1), k - 1))
  return {'fenced', '0', '0', '0'}
end
if k <= tonumber(fence) then
  return {'fenced', '0', '0', '0'}
end

local h, me = KEYS[1], ARGV[1]
local R, total, B = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local w, ss, sa = tonumber(ARGV[5]), tonumber(ARGV[8]), tonumber(ARGV[9])
local eps = 1e-6
local function bad(x, lo, hi)
  return x == nil or x ~= x or x < lo - eps or x > hi + eps
end
if bad(B, 0, math.huge) or bad(total, 0, B) or bad(R, 0, total) or bad(w, 0, B + 1e12)
   or bad(ss, 0, R) or bad(sa, ss, math.huge) then
  return {'invalid', '0', '0', 'argv'}
end
local spent = tonumber(redis.call('HGET', h, 'spent') or '0')
local arrived = tonumber(redis.call('HGET', h, 'arrived') or '0')
local released = tonumber(redis.call('HGET', h, 'released') or '0')
local old_ss = tonumber(redis.call('HGET', h, 'ss:' .. me) or '0')
local old_sa = tonumber(redis.call('HGET', h, 'sa:' .. me) or '0')
if bad(spent, 0, B) or bad(released, 0, total) or bad(arrived, 0, math.huge)
   or bad(old_ss, 0, R) or bad(old_sa, 0, math.huge) or spent + total - released > B + eps then
  return {'invalid', '0', '0', 'pool'}
end

-- reserves of replicas whose lease lapsed return to the pool
for i = 1, #KEYS - 2 do
  local who, Rj = ARGV[11 + 2 * i], tonumber(ARGV[12 + 2 * i])
  if bad(Rj, 0, total) then
    return {'invalid', '0', '0', 'argv'}
  end
  if redis.call('EXISTS', KEYS[2 + i]) == 0 and redis.call('HSETNX', h, 'c:' .. who, 'lapsed') == 1 then
    local ssj = tonumber(redis.call('HGET', h, 'ss:' .. who) or '0')
    released = tonumber(redis.call('HINCRBYFLOAT', h, 'released', math.max(Rj - ssj, 0)))
  end
end

local confirmed = redis.call('HEXISTS', h, 'c:' .. me) == 1
-- what this replica spent alone enters the pool once (re-reports add only the rest); while its
-- reserve is held, the reported part leaves the held sum as it enters spent
if ss > old_ss then
  redis.call('HSET', h, 'ss:' .. me, ARGV[8])
  spent = tonumber(redis.call('HINCRBYFLOAT', h, 'spent', ss - old_ss))
  if not confirmed then
    released = tonumber(redis.call('HINCRBYFLOAT', h, 'released', ss - old_ss))
  end
  old_ss = ss
end
if sa > old_sa then
  redis.call('HSET', h, 'sa:' .. me, ARGV[9])
  arrived = tonumber(redis.call('HINCRBYFLOAT', h, 'arrived', sa - old_sa))
end
if ARGV[11] == '1' and not confirmed then
  redis.call('HSET', h, 'c:' .. me, '1')
  released = tonumber(redis.call('HINCRBYFLOAT', h, 'released', R - old_ss))
end

local cap = B - (total - released)
local verdict = 'joined'
if ARGV[10] == '1' then
  arrived = tonumber(redis.call('HINCRBYFLOAT', h, 'arrived', ARGV[5]))
  if arrived > B + eps then
    verdict = 'excess'
  elseif spent + w <= cap + eps then
    spent = tonumber(redis.call('HINCRBYFLOAT', h, 'spent', ARGV[5]))
    verdict = 'floor'
  else
    verdict = 'held'
  end
end
redis.call('PEXPIRE', h, ARGV[7])
return {verdict, tostring(arrived), tostring(spent), tostring(cap)}
