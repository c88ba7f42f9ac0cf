// What the gateway's Redis clients (the replica sync, replica_sync_redis.hpp, and the replica feed,
// replica_feed.hpp) read back from Redis, checked before anything of it is used: Redis is shared
// state that other processes (other fleets, an operator's redis-cli, an attacker who reached it)
// can write, so every value is parsed strictly and bounded, and one that is not what a gateway
// replica of this build writes is ignored, counted (holdback_gateway_replica_sync_rejected_total
// {reason}) and logged (ReplicaInputLog: once per reason per interval). Kept apart from the Redis
// clients so that it is tested without a server; the restoration figures' text is in
// replica_figures_text.hpp.
//
// Also here: the key prefix and the config fingerprint that keep fleets sharing one Redis apart.
//
// Thread safety: the free functions use their arguments only; ReplicaInputLog is
// thread-compatible (one per client thread) and writes counters that are atomic.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "holdback/core/types.hpp"
#include "holdback/detector/dispatch_ledger.hpp"

namespace holdback::gateway {

// Why a value read from Redis was ignored (the `reason` label of
// holdback_gateway_replica_sync_rejected_total).
enum class RejectReason : std::uint8_t {
  kMalformed,    // not the form a replica writes (not a number, a field missing or extra)
  kNotFinite,    // NaN or an infinity
  kNegative,     // a count, rate or size below 0
  kOutOfRange,   // above what any replica publishes (see the limits below)
  kTime,         // a time further from now than kMaxTimeBehind / kMaxTimeAhead
  kTooLong,      // a string longer than its limit
  kTooMany,      // more entries than allowed (victims, heads, replicas, events in a message)
  kWrongType,    // a Redis reply of another type than the command returns on a replica's data
  kFingerprint,  // a replica that publishes another config fingerprint, or none
};
inline constexpr std::size_t kRejectReasons = 9;
// The label value: "malformed", "not_finite", "negative", "out_of_range", "time", "too_long",
// "too_many", "wrong_type", "fingerprint".
[[nodiscard]] std::string_view toString(RejectReason reason) noexcept;

using RejectCounters = std::array<std::atomic<std::uint64_t>, kRejectReasons>;

// The limits. A value outside them is never one a replica of this gateway publishes.
struct ReplicaInputLimits {
  // A replica's pending requests or tokens on one server (the dispatch ledger's own cap).
  static constexpr std::int64_t kMaxPending = std::int64_t{1} << 40;
  // A rate (per second) or a count (revocations, leases) in the restoration figures.
  static constexpr double kMaxFigure = 1e9;
  // A replica's identity (HOST-PID-RANDOM) and a value of its hash.
  static constexpr std::size_t kMaxIdBytes = 200;
  static constexpr std::size_t kMaxPendingBytes = 64;
  static constexpr std::size_t kMaxFiguresBytes = 2048;
  static constexpr std::size_t kMaxFingerprintBytes = 64;
  // Replicas read per round (more in the replica set: the rest ignored and counted).
  static constexpr std::size_t kMaxReplicas = 1024;
  // A replica feed message and the events in one (a publisher splits larger batches).
  static constexpr std::size_t kMaxFeedMessageBytes = std::size_t{4} << 20;
  static constexpr std::size_t kFeedMessageSplitBytes = std::size_t{1} << 20;
  static constexpr std::size_t kMaxFeedEvents = std::size_t{1} << 16;
  static constexpr std::size_t kMaxFeedLineBytes = 4096;
  // Times (wall clock) older than this or further ahead than that are not a replica's: a victim
  // dispatched or a queue head enqueued more than a day ago, or a clock a minute ahead.
  static constexpr double kMaxTimeBehind = 24 * 3600.0;
  static constexpr double kMaxTimeAhead = 60.0;
  // The largest string and array a Redis reply may carry (a larger one is a failed read).
  static constexpr std::size_t kMaxReplyString = kMaxFeedMessageBytes;
  static constexpr std::size_t kMaxReplyElements = kMaxReplicas + 16;
};

// a + b for counts that saturate at `cap` (both >= 0) instead of overflowing.
[[nodiscard]] constexpr std::int64_t saturatingAdd(std::int64_t a, std::int64_t b,
                                                   std::int64_t cap) noexcept {
  return a >= cap || b >= cap - a ? cap : a + b;
}

// A whole decimal integer in [lo, hi] (no sign but '-', no spaces); false with `why` set
// otherwise.
bool parseBoundedInt(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out,
                     RejectReason& why) noexcept;
// A whole finite decimal number in [lo, hi]; false with `why` set otherwise.
bool parseBoundedDouble(std::string_view text, double lo, double hi, double& out,
                        RejectReason& why) noexcept;

// One endpoint's pending work as a replica publishes it: "<requests> <tokens>", each in
// [0, kMaxPending].
bool parsePending(std::string_view text, InFlightLoad& out, RejectReason& why) noexcept;

// A replica identity from the replica set or a feed message: 1 to kMaxIdBytes printable ASCII
// bytes, no space.
bool validReplicaId(std::string_view id, RejectReason& why) noexcept;

// One replica feed event line: "D <tokens> <url>", "C <tokens> <url>" or "A <kvTokens>
// <priority>" (tokens in [0, kMaxPending], the priority a 32-bit integer).
struct FeedEvent {
  char kind = 0;
  std::int64_t tokens = 0;
  std::string_view url;   // D, C: into the line
  Priority priority = 0;  // A
};
bool parseFeedEvent(std::string_view line, FeedEvent& out, RejectReason& why) noexcept;

// A feed message's first line: "<id> <fingerprint>".
bool parseFeedHeader(std::string_view line, std::string_view& id, std::string_view& fingerprint,
                     RejectReason& why) noexcept;

// The fingerprint of what must match for replicas to share: the effective config text and the
// model servers (sorted: replicas may list them in any order). 16 hex digits.
[[nodiscard]] std::string configFingerprint(std::string_view configText,
                                            std::vector<std::string> endpointUrls);
// The default key prefix: "holdback:" and the fingerprint's first 8 hex digits and ':'.
[[nodiscard]] std::string defaultKeyPrefix(std::string_view fingerprint);
// Whether `prefix` may prefix the Redis keys (--replica-sync-prefix): 1 to 128 printable ASCII
// bytes, no space; `error` says what is wrong otherwise.
bool validKeyPrefix(std::string_view prefix, std::string& error);

// `text` for a log line: at most `max` bytes, other than printable ASCII as \xNN.
[[nodiscard]] std::string printable(std::string_view text, std::size_t max = 64);

// Counts every rejected value into `counters` and says so on `out` at most once per reason per
// `interval` (with how many of that reason were ignored since the last line), and once per
// replica that publishes another fingerprint (at most kMaxForeign replicas are remembered).
// Thread-compatible: one per client thread.
class ReplicaInputLog {
 public:
  static constexpr std::size_t kMaxForeign = 1024;
  ReplicaInputLog(const char* who, RejectCounters& counters,
                  std::chrono::steady_clock::duration interval = std::chrono::seconds(30),
                  std::FILE* out = stderr)
      : who_(who), counters_(counters), interval_(interval), out_(out) {}

  // A value ignored: `where` names it (a replica and a field), `value` is what was read.
  void reject(RejectReason reason, std::string_view where, std::string_view value,
              std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // A replica publishing fingerprint `theirs` (empty: none) instead of `mine`: counted as
  // kFingerprint, logged once per replica.
  void foreign(std::string_view id, std::string_view theirs, std::string_view mine);

 private:
  const char* who_;
  RejectCounters& counters_;
  std::chrono::steady_clock::duration interval_;
  std::FILE* out_;
  std::array<std::chrono::steady_clock::time_point, kRejectReasons> last_{};
  std::array<bool, kRejectReasons> logged_{};
  std::array<std::uint64_t, kRejectReasons> since_{};
  std::unordered_set<std::string> foreign_;
};

}  // namespace holdback::gateway
