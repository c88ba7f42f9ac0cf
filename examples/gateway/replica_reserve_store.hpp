// The reservation table in Redis (--replica-mode reserve): the two server-side scripts and the
// client that calls them. <P> is the key prefix (--replica-sync-prefix), <url> an endpoint's URL,
// <id> a replica's identity:
//   <P>bk:<url>        a set: the replicas with bookings on the endpoint
//   <P>bk:<url>:<id>   a hash: replica <id>'s bookings on the endpoint, booking -> KV tokens
//   <P>hb:<id>         replica <id>'s heartbeat, PX = the lease (--replica-lease-ms)
//
// book(): ONE script call (EVALSHA; on NOSCRIPT the scripts are loaded again and the call
// retried once); bookBatch() books several requests in that one call, in order, stopping at the
// first refused (requests that arrive together cost one round trip, not one each). The script
// reads the candidates in the order given; for each, booked = the sum over the bookings of every
// replica in its set whose heartbeat lives (the bookings of a replica whose heartbeat is gone are
// deleted, and counted as expired; an entry that is not a decimal integer in [0, kMaxPending] is
// ignored and counted as bad), used = max(scraped, booked) per dimension, and the request fits by
// reservationFits (include/holdback/detector/reservation.hpp: slots unknown (<= 0) or
// usedSlots + 1 <= slots, and kv <= 0 or kvCapacity <= 0 or usedKv + kv <= kvCapacity or
// usedSlots == 0; negative inputs count as 0); the first that fits is booked (HSET + SADD) and
// its position returned, none fitting returns 0. With `keepFree` K > 0 (a request below the top
// band, K the reserve policy's fixed reserve) the request must also leave K slots free over
// the candidates together: sum over candidates of max(0, slots - usedSlots) - 1 >= K (a candidate
// of unknown slots counts as room enough), the reserve that one gateway's controller keeps for its
// protected band (the per-endpoint rule alone lets replicas that each see the reserve free spend it
// together). When this replica's own heartbeat is gone the script books nothing and says so: the
// caller re-asserts (below) and calls again.
//
// reassert(): one script call: the heartbeat SET PX lease, then, per endpoint, this replica's
// hash replaced by its live bookings (idempotent; rebuilds the table after Redis restarted empty,
// and drops any booking whose release was lost while Redis was unreachable).
//
// appendRelease(): HDEL <P>bk:<url>:<id> <booking>, pipelined (read its reply with
// readReleases()). A replica's calls all go through one connection in order, so a re-assertion
// never brings back a booking released before it.
//
// Thread safety: thread-compatible (one ReservationStore per connection, one thread).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis_connection.hpp"

namespace holdback::gateway {

// The scripts (exposed for tests).
extern const std::string_view kReserveBookScript;
extern const std::string_view kReserveReassertScript;

struct ReserveCandidate {
  std::string_view url;
  std::int64_t scrapedSlots = 0;  // running + waiting, the calling replica's last scrape
  std::int64_t scrapedKv = 0;     // KV tokens in use, same scrape
  std::int64_t slots = 0;         // the endpoint's slot count (0: unknown, not checked)
  std::int64_t kvCapacity = 0;    // its KV capacity in tokens (0: unknown, not checked)
};

struct ReserveBookResult {
  int booked = -1;             // the candidate's position; -1: none had room
  bool heartbeatGone = false;  // nothing booked: re-assert first
  std::int64_t bad = 0;        // entries ignored (not an integer in range, a key of another type)
  std::int64_t expired = 0;    // other replicas' booking hashes deleted: heartbeat gone
};

// One request of a batch (bookBatch): its booking id, KV tokens, the pool-wide reserve it must
// leave (keepFree, as book()'s) and its candidates in order.
struct ReserveBatchItem {
  std::uint64_t booking = 0;
  std::int64_t kvTokens = 0;
  std::int64_t keepFree = 0;
  std::span<const ReserveCandidate> candidates;
};

struct ReserveBatchResult {
  // Per request tried, in order: the candidate's position, or -1 (none had room; always the
  // last one tried, the requests after it were not tried). Empty when heartbeatGone.
  std::vector<int> booked;
  bool heartbeatGone = false;  // nothing booked: re-assert first
  std::int64_t bad = 0;
  std::int64_t expired = 0;
};

class ReservationStore {
 public:
  ReservationStore(std::string prefix, std::string replicaId, int leaseMs)
      : prefix_(std::move(prefix)), id_(std::move(replicaId)), lease_ms_(leaseMs) {}

  [[nodiscard]] const std::string& replicaId() const noexcept { return id_; }
  // Loads both scripts (SCRIPT LOAD); false with error() set.
  bool load(RedisConnection& c);
  // nullopt: the call failed (error() says why; close the connection).
  // `keepFree` > 0: the pool-wide reserve the request must leave (below).
  std::optional<ReserveBookResult> book(RedisConnection& c, std::uint64_t booking,
                                        std::int64_t kvTokens,
                                        std::span<const ReserveCandidate> candidates,
                                        std::int64_t keepFree = 0);
  // Books `items` in order in ONE script call, as book() each, stopping at the first that fits
  // nowhere (the requests after it are not tried: a lower request never takes room a higher one
  // was refused). nullopt: the call failed.
  std::optional<ReserveBatchResult> bookBatch(RedisConnection& c,
                                              std::span<const ReserveBatchItem> items);
  // `live[k]`: the bookings (booking, KV tokens) on endpoint `urls[k]`.
  bool reassert(RedisConnection& c, std::span<const std::string> urls,
                std::span<const std::vector<std::pair<std::uint64_t, std::int64_t>>> live);
  void appendRelease(RedisConnection& c, std::string_view url, std::uint64_t booking);
  // Reads `n` appended releases' replies; false on a failed read or an error reply.
  bool readReleases(RedisConnection& c, std::size_t n);
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

  // Key names (tests, operators).
  [[nodiscard]] std::string bookingsKey(std::string_view url) const;
  [[nodiscard]] std::string heartbeatKey() const { return prefix_ + "hb:" + id_; }

 private:
  RedisReply evalsha(RedisConnection& c, const std::string& sha, std::string_view script,
                     std::vector<std::string>& args);
  std::string prefix_;
  std::string id_;
  int lease_ms_;
  std::string book_sha_;
  std::string reassert_sha_;
  std::string error_;
};

}  // namespace holdback::gateway
