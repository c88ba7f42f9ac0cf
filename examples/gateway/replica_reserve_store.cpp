#include "replica_reserve_store.hpp"

#include <algorithm>
#include <string>

#include "replica_input.hpp"

namespace holdback::gateway {

// ARGV: prefix, replica, max kv, m, then per request: booking, kv, keep, n, then per candidate:
// url, scraped slots, scraped kv, slots, kv capacity. The requests are booked in order, stopping
// at the first that fits nowhere. Returns {status (-1: own heartbeat gone, nothing booked; else
// 0), bad, expired, then per request tried: its position (0: none fits, the last one tried)}.
const std::string_view kReserveBookScript = R"lua(
local P, me = ARGV[1], ARGV[2]
local maxKv = tonumber(ARGV[3])
local m = tonumber(ARGV[4])
local function nonneg(v)
  local x = tonumber(v)
  if x == nil or x ~= x or x < 0 then return 0 end
  return x
end
local function entry(v)
  if type(v) ~= 'string' or #v > 15 or not string.match(v, '^%d+$') then return nil end
  local x = tonumber(v)
  if x > maxKv then return nil end
  return x
end
if redis.call('EXISTS', P .. 'hb:' .. me) == 0 then return {-1, 0, 0} end
local bad, expired = 0, 0
-- Books the request whose fields start at ARGV[a]: its position (0: none), and where the next
-- request's fields start.
local function book(a)
  local id, kvs = ARGV[a], ARGV[a + 1]
  local kv = nonneg(kvs)
  local keep = nonneg(ARGV[a + 2])
  local n = tonumber(ARGV[a + 3])
  local c0 = a + 3
  local used, free = {}, 0
  for i = 1, n do
    local b = c0 + (i - 1) * 5
    local set = P .. 'bk:' .. ARGV[b + 1]
    local bSlots, bKv = 0, 0
    local members = redis.pcall('SMEMBERS', set)
    if members.err then
      bad = bad + 1
      members = {}
    end
    for _, r in ipairs(members) do
      local h = set .. ':' .. r
      if redis.call('EXISTS', P .. 'hb:' .. r) == 0 then
        redis.call('DEL', h)
        redis.call('SREM', set, r)
        expired = expired + 1
      else
        local vals = redis.pcall('HVALS', h)
        if vals.err then
          bad = bad + 1
        else
          for _, v in ipairs(vals) do
            local x = entry(v)
            if x == nil then
              bad = bad + 1
            else
              bSlots = bSlots + 1
              bKv = bKv + x
            end
          end
        end
      end
    end
    local s = math.max(nonneg(ARGV[b + 2]), bSlots)
    used[i] = {s, math.max(nonneg(ARGV[b + 3]), bKv)}
    local slots = nonneg(ARGV[b + 4])
    if slots > 0 then free = free + math.max(0, slots - s) else free = free + keep + 1 end
  end
  local after = c0 + n * 5 + 1
  if keep > 0 and free - 1 < keep then return 0, after end
  for i = 1, n do
    local b = c0 + (i - 1) * 5
    local set = P .. 'bk:' .. ARGV[b + 1]
    local slots, kvCap = nonneg(ARGV[b + 4]), nonneg(ARGV[b + 5])
    local usedSlots, usedKv = used[i][1], used[i][2]
    -- reservationFits (include/holdback/detector/reservation.hpp), without sums
    if (slots <= 0 or usedSlots < slots) and
        (kv == 0 or kvCap == 0 or (usedKv <= kvCap and kv <= kvCap - usedKv) or usedSlots == 0) then
      local ok = redis.pcall('HSET', set .. ':' .. me, id, kvs)
      if type(ok) == 'table' and ok.err then
        bad = bad + 1
      else
        local added = redis.pcall('SADD', set, me)
        if type(added) == 'table' and added.err then
          redis.call('HDEL', set .. ':' .. me, id)
          bad = bad + 1
        else
          return i, after
        end
      end
    end
  end
  return 0, after
end
local out = {0, 0, 0}
local a = 5
for j = 1, m do
  local pos
  pos, a = book(a)
  out[3 + j] = pos
  if pos == 0 then break end
end
out[2], out[3] = bad, expired
return out
)lua";

// ARGV: prefix, replica, lease ms, n, then per endpoint: url, k, then k x (booking, kv).
// Returns the endpoints whose replica set is a key of another type (their bookings unseen).
const std::string_view kReserveReassertScript = R"lua(
local P, me = ARGV[1], ARGV[2]
redis.call('SET', P .. 'hb:' .. me, '1', 'PX', ARGV[3])
local n = tonumber(ARGV[4])
local a = 5
local bad = 0
for e = 1, n do
  local set = P .. 'bk:' .. ARGV[a]
  local k = tonumber(ARGV[a + 1])
  local h = set .. ':' .. me
  redis.call('DEL', h)
  a = a + 2
  for j = 1, k do
    redis.call('HSET', h, ARGV[a], ARGV[a + 1])
    a = a + 2
  end
  if k > 0 then
    local added = redis.pcall('SADD', set, me)
    if type(added) == 'table' and added.err then bad = bad + 1 end
  end
end
return bad
)lua";

namespace {

bool isError(const RedisReply& r) {
  return r && r->type == REDIS_REPLY_ERROR;
}
bool noScript(const RedisReply& r) {
  return isError(r) && r->len >= 8 && std::string_view(r->str, 8) == "NOSCRIPT";
}
std::optional<long long> integer(const redisReply* r) {
  if (r == nullptr || r->type != REDIS_REPLY_INTEGER) return std::nullopt;
  return r->integer;
}

}  // namespace

std::string ReservationStore::bookingsKey(std::string_view url) const {
  return prefix_ + "bk:" + std::string(url) + ":" + id_;
}

bool ReservationStore::load(RedisConnection& c) {
  for (auto [script, sha] : {std::pair{kReserveBookScript, &book_sha_},
                             std::pair{kReserveReassertScript, &reassert_sha_}}) {
    const RedisReply r = c.command({"SCRIPT", "LOAD", std::string(script)});
    if (!r || r->type != REDIS_REPLY_STRING) {
      error_ = "SCRIPT LOAD: " + (r ? replyError(r.get()) : c.error());
      return false;
    }
    *sha = std::string(r->str, r->len);
  }
  return true;
}

RedisReply ReservationStore::evalsha(RedisConnection& c, const std::string& sha,
                                     std::string_view script, std::vector<std::string>& args) {
  args[1] = sha;
  RedisReply r = c.command(args);
  if (noScript(r)) {  // Redis restarted, or SCRIPT FLUSH: load and call once more
    if (!load(c)) return nullptr;
    args[1] = script == kReserveBookScript ? book_sha_ : reassert_sha_;
    r = c.command(args);
  }
  if (!r) error_ = c.error();
  return r;
}

std::optional<ReserveBatchResult> ReservationStore::bookBatch(
    RedisConnection& c, std::span<const ReserveBatchItem> items) {
  if (book_sha_.empty() && !load(c)) return std::nullopt;
  std::vector<std::string> args{"EVALSHA",
                                "",
                                "0",
                                prefix_,
                                id_,
                                std::to_string(ReplicaInputLimits::kMaxPending),
                                std::to_string(items.size())};
  for (const ReserveBatchItem& item : items) {
    args.push_back(std::to_string(item.booking));
    args.push_back(std::to_string(
        std::clamp<std::int64_t>(item.kvTokens, 0, ReplicaInputLimits::kMaxPending)));
    args.push_back(std::to_string(item.keepFree < 0 ? 0 : item.keepFree));
    args.push_back(std::to_string(item.candidates.size()));
    for (const ReserveCandidate& k : item.candidates) {
      args.emplace_back(k.url);
      args.push_back(std::to_string(k.scrapedSlots));
      args.push_back(std::to_string(k.scrapedKv));
      args.push_back(std::to_string(k.slots));
      args.push_back(std::to_string(k.kvCapacity));
    }
  }
  const RedisReply r = evalsha(c, book_sha_, kReserveBookScript, args);
  if (!r) return std::nullopt;
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->elements > 3 + items.size()) {
    error_ = "the booking script: " + replyError(r.get());
    return std::nullopt;
  }
  const auto status = integer(r->element[0]);
  const auto bad = integer(r->element[1]);
  const auto expired = integer(r->element[2]);
  if (!status || !bad || !expired || *status < -1 || *status > 0 || *bad < 0 || *expired < 0 ||
      (*status == -1 && r->elements != 3)) {
    error_ = "the booking script: a reply out of range";
    return std::nullopt;
  }
  ReserveBatchResult out;
  out.heartbeatGone = *status == -1;
  out.bad = *bad;
  out.expired = *expired;
  for (std::size_t j = 3; j < r->elements; ++j) {
    const auto pos = integer(r->element[j]);
    const std::size_t item = j - 3;
    // Every position but the last one tried is a booking; the last may be a refusal.
    if (!pos || *pos < 0 || *pos > static_cast<long long>(items[item].candidates.size()) ||
        (*pos == 0 && j + 1 != r->elements)) {
      error_ = "the booking script: a reply out of range";
      return std::nullopt;
    }
    out.booked.push_back(*pos > 0 ? static_cast<int>(*pos - 1) : -1);
  }
  if (!out.heartbeatGone && out.booked.empty() && !items.empty()) {
    error_ = "the booking script: no request tried";
    return std::nullopt;
  }
  return out;
}

std::optional<ReserveBookResult> ReservationStore::book(
    RedisConnection& c, std::uint64_t booking, std::int64_t kvTokens,
    std::span<const ReserveCandidate> candidates, std::int64_t keepFree) {
  const ReserveBatchItem item{booking, kvTokens, keepFree, candidates};
  const std::optional<ReserveBatchResult> r = bookBatch(c, std::span(&item, 1));
  if (!r) return std::nullopt;
  ReserveBookResult out;
  out.heartbeatGone = r->heartbeatGone;
  out.booked = r->booked.empty() ? -1 : r->booked.front();
  out.bad = r->bad;
  out.expired = r->expired;
  return out;
}

bool ReservationStore::reassert(
    RedisConnection& c, std::span<const std::string> urls,
    std::span<const std::vector<std::pair<std::uint64_t, std::int64_t>>> live) {
  if (reassert_sha_.empty() && !load(c)) return false;
  std::vector<std::string> args{
      "EVALSHA", "", "0", prefix_, id_, std::to_string(lease_ms_), std::to_string(urls.size())};
  for (std::size_t k = 0; k < urls.size(); ++k) {
    args.push_back(urls[k]);
    const std::size_t n = k < live.size() ? live[k].size() : 0;
    args.push_back(std::to_string(n));
    for (std::size_t j = 0; j < n; ++j) {
      args.push_back(std::to_string(live[k][j].first));
      args.push_back(std::to_string(live[k][j].second < 0 ? 0 : live[k][j].second));
    }
  }
  const RedisReply r = evalsha(c, reassert_sha_, kReserveReassertScript, args);
  if (!r) return false;
  if (r->type != REDIS_REPLY_INTEGER) {
    error_ = "the re-assertion script: " + replyError(r.get());
    return false;
  }
  return true;
}

void ReservationStore::appendRelease(RedisConnection& c, std::string_view url,
                                     std::uint64_t booking) {
  c.append({"HDEL", bookingsKey(url), std::to_string(booking)});
}

bool ReservationStore::readReleases(RedisConnection& c, std::size_t n) {
  bool ok = true;
  for (std::size_t i = 0; i < n; ++i) {
    const RedisReply r = c.next();
    if (!r) {
      error_ = "HDEL: " + c.error();
      return false;
    }
    if (isError(r)) {  // a key of another type: read on, then fail (the re-assertion repairs it)
      error_ = "HDEL: " + replyError(r.get());
      ok = false;
    }
  }
  return ok;
}

}  // namespace holdback::gateway
