// DispatchLedger: the gateway's own dispatches and completions per endpoint, and the last scrape
// of each endpoint's telemetry, combined into the figures the saturation detectors read. It is
// the library's one in-flight mechanism: InFlightTracker (in_flight_tracker.hpp) is a by-name
// wrapper over it, and the concurrency detector's in-flight counts come from the same counters.
//
// Why
//   Scraped telemetry is up to one scrape interval old (50 ms) while a gateway dispatches every
//   millisecond: between two scrapes, dozens of requests go out against the same stale-but-fresh
//   reading and the servers' queues overshoot (the "thundering herd", docs/guide/detectors.md). The
//   ledger credits every dispatch the last scrape cannot have seen against that scrape.
//
// The algorithm
//   Per endpoint (a slot) four monotonic uint64 counters: requests and tokens dispatched, requests
//   and tokens completed. dispatch() bumps the first two and returns a move-only DispatchHandle
//   whose release() (or destructor) bumps the last two exactly once; releaseTokens() completes the
//   tokens early and keeps the request counted. In flight = dispatched - completed.
//
//   installScrape(id, scrape[, mark]) stores the scraped telemetry and a baseline: the counters
//   when the server sampled its metrics. With a ScrapeMark (mark(id) taken just before the host
//   sent the scrape request) the baseline is the mark; without one it is the counters at install
//   minus `scrapeMarginRequests` dispatches assumed still on the wire (never below the previous
//   baseline; their tokens pro rata of the dispatches since that baseline).
//   Reconciliation (options.reconcileInFlight, on by default): a dispatch before the baseline may
//   not have reached the server when it sampled (the host connects, writes, the server parses;
//   under load that takes longer than the time to the next scrape). The scrape shows what the
//   server knew: the excess x = max(0, in flight at the baseline - floor(running + waiting)) is
//   requests on their way, plus any completions the host lost (a leak, which never arrives).
//   A leak is a lasting offset, requests on the way a passing one, so the lowest excess of the
//   scrapes of about the last second (four stretches of 250 ms of scrape time, by
//   Scrape::updateTime, the last one still filling: the offset is taken once an excess has held
//   in every scrape of at least three whole stretches and the current one) is taken as the
//   offset and the rest, unseen = x - that minimum, is moved after the baseline: those requests
//   count as pending (their tokens pro rata of the tokens in flight), and the budget is raised by
//   as many (it counts dispatches since the scrape's own mark). So a leaking host costs at most
//   the leaks of the last second, not all of them; the price is that requests still on their way
//   after that read as seen. A request the server has finished but whose completion the host
//   has not yet recorded reads as unseen too (one extra pending request until that completion
//   offsets it). The window is in time, not in scrapes: with a count of five scrapes a
//   completion the host recorded 125 ms late (five scrapes at 25 ms, a loaded
//   gateway tearing down an aborted exchange) was taken for a leak, and the next request still
//   on its way after it read as seen: a slot handed out twice (tests/e2e GatewayEviction). Servers
//   that also serve other clients (or replicas) show more, so the rule never makes the ledger count
//   less than without it. The history restarts at 0 at registration.
//
//   fill() writes, per endpoint: updateTime, waitingQueueSize, runningRequests, kvCacheUsage of
//   the last scrape, corrected (options.correction, on by default), inFlightRequests/Tokens, and
//   the capacity: maxRunningRequests = the slot count M below (configured, else observed; 0 while
//   unknown) and kvCapacityTokens = the configured K (0 when not configured).
//     pending       = max(0, (dispatched - base.dispatched) - (completed - base.completed))
//     pendingTokens = the same over tokens
//     maxRunning M known (EndpointCapacity::maxRunningRequests > 0):
//       running' = running + min(pending, max(0, M - running))     new work takes free slots
//       waiting' = waiting + max(0, running + pending - M)          the rest queues
//     M not configured, options.slotCountFromScrapes (on by default): M = the observed slot
//       count S of the endpoint (below), with the same two lines; while S is 0:
//                 running' = running + pending, waiting' = waiting + pending   (conservative)
//     M not configured, slotCountFromScrapes off: the conservative line, always
//     KV capacity K known (kvCapacityTokens > 0): kv' = min(1, kv + pendingTokens / K)
//     options.creditCompletions (off by default) and more completions than dispatches since the
//       scrape (freed = completed - dispatched since the base, this replica's own only):
//       total = max(0, running + waiting - freed); running' = min(running, total);
//       waiting' = total - running'   (the server refills slots from its queue first)
//     R gateway replicas (options.replicas > 1), each with its own ledger: pending and
//     pendingTokens are multiplied by R (every replica assumed to dispatch as this one does);
//     with replica sync (setPeerPending, replica_sync.hpp) they are this replica's own plus the
//     other replicas' reported sum plus (R - 1) times this replica's dispatches since that sum
//     was installed (theirs since then are not in it yet: each assumed to dispatch as this one
//     does, for one sync interval only); with replica sync and a rank, the requests are this
//     replica's own plus the larger of that and the others' parts of the scrape's free slots
//     (below)
//   The free room split (replica sync with a rank: ReplicaSync::rank): every replica reads the
//   same scrape, so a scrape that shows one free slot shows it to every replica, and each would
//   take it before any sync could tell the others. So the free slots are divided among the R
//   live replicas: of F = max(0, floor(M - running) - sharedRoomSlots) (M known; the first
//   sharedRoomSlots stay visible to every replica), this replica's part is floor(F / R), plus
//   one when its position on the endpoint at the scrape's time (ReplicaTurn, on the replicas'
//   shared clock: setReplicaClockOffset) is below F mod R. Once this replica has sent its part,
//   fill counts the rest as the others' pending requests (or their reported sum, when larger);
//   before, the view is the unsplit one (policies that read the pool's load level see it as known).
//   So no replica sends more than its part, the parts sum to F, and the rotation hands a lone free
//   slot to each in turn. Room a replica leaves unused is split again at the next scrape, not at a
//   sync (the others' figures are up to a sync interval old: a replica taking room it believes
//   unclaimed could take what another has just claimed). Tokens are not split (the others' pending
//   tokens count as without a rank): a KV part of 1 / R per replica left a reservation policy's
//   reserve, sized in KV tokens, fitting nowhere. Without a rank (-1), or with M unknown, the
//   rule above applies.
//   The replica feed (setPeerFeed(true); replica_sync.hpp, "The replica feed"): the host
//   delivers every other replica's dispatches and completions to this ledger as they happen
//   (recordPeerDispatch, recordPeerCompletion), so it counts the pool's work since its own
//   scrape as one ledger would: pending = (own + peers' dispatches since the baseline) -
//   (own + peers' completions since it), the peers' counters marked with this replica's own
//   (ScrapeMark). The `replicas` share, setPeerPending's sums and the free room split do not
//   apply while the feed is live: each replica scrapes on its own timer, so a scrape's freed
//   room is seen first by the replica that scraped it, whose dispatches reach the others a feed
//   delay later. An event the feed lost (a dead replica's completions, a broken connection)
//   counts until this replica's next scrape takes a baseline past it. With the feed live,
//   inFlightRequests/Tokens are the pool's: this replica's own plus the others' dispatches less
//   their completions as the feed reported them (each floored at 0; the picker breaks ties on
//   them, and replicas that each counted only their own picked alike: static-1.0 loaded the
//   simulated pool 1.03-1.05 on the mean instead of 1.00). A completion the feed lost stays in
//   those counts until the host completes it (recordPeerCompletion: the gateway does so for a
//   replica it has not heard from for 2 s, and for every replica when its feed breaks).
//   The observed slot count S (a slow start): a server that ran R requests at once has at least R
//   slots, so every installed scrape raises S to floor(running) (S = max running shown). A
//   scrape that shows a queue (waiting > 0) shows the server taking no more work than it runs
//   (its slots, or its KV cache, are full): S restarts from that scrape's running. So new
//   dispatches count as running only into capacity a scrape has demonstrated, and the herd
//   protection holds (everything pending counts as waiting) until capacity has been shown. S is
//   per endpoint, starts at 0 at registration (also a re-registered name), is capped at
//   kMaxObservedSlots, and is learnt only from scrapes fill corrects (valid, see below); it does
//   not decay with time. A server restarted with fewer slots: S stays too high (pending work
//   reads as running into slots it no longer has, at most one scrape interval's dispatches)
//   until its first scrape showing a queue, which cuts S; a host that knows of the restart can
//   re-register the endpoint. A configured M (setCapacity) takes precedence; S is still learnt.
//   Completions since the scrape offset dispatches since the scrape but never lower the scraped
//   figures below what the server reported (the next scrape shows freed capacity), unless
//   options.creditCompletions (above).
//   An endpoint without a scrape gets updateTime = nullopt (no metrics: stale) and zero telemetry.
//   Invalid scraped telemetry (NaN, infinite, negative, KV above 1) is passed through unchanged
//   so that the detector sees it as invalid; it is never "corrected" into a plausible value.
//   Nor are readings above 1e300 (adding to them could only overflow).
//
//   Dispatch budget (options.dispatchBudget, off by default): a safety net for a wrong ledger (a
//   host that reports completions too early or twice, a server that admits less than it
//   reports). At install, budget = free slots (M - running, when M is known or S > 0) + free queue
//   (budgetQueueDepth - waiting), floored at 0. Once the dispatches since the scrape (gross, not
//   net of completions) reach it, fill() reports waiting' >= budgetQueueDepth, so a utilization
//   detector whose queueDepthThreshold is budgetQueueDepth scores the endpoint >= 1 and its
//   filter drops it until the next scrape. With R replicas each gets budget / R (its dispatches
//   count R times). It counts no completions, so forgotten completions
//   cannot close an endpoint for longer than one scrape interval.
//
// Bad input (each defined; nothing throws, nothing underflows)
//   - negative token counts count as 0; more than kMaxTokensPerRequest count as that maximum;
//   - counters are uint64 and differences are taken modulo 2^64, so even wrapping is harmless;
//   - a completion without a dispatch (recordCompletion beyond the dispatches) is dropped and
//     recordCompletion returns false; handles cannot complete twice;
//   - in flight and pending never read negative (clamped at 0). A request completed both by its
//     handle and by recordCompletion is a double completion the ledger cannot tell apart from a
//     legitimate one: it under-counts that endpoint for as long as it stays registered;
//     use one mechanism per request;
//   - NaN / infinite / negative / huge scraped values are stored and passed through unchanged
//     (see above); a scrape timestamp from the future is stored as given: the detector classifies
//     it (fresh within its staleness threshold, invalid beyond). The last installed scrape wins;
//   - an endpoint removed with work in flight: its id goes stale at once (fill writes no metrics
//     and zero counts, dispatch returns an inactive handle, installScrape returns false); the
//     outstanding handles complete into the retired slot, which is reused by a later
//     registration only once drained. A re-registered name starts at zero;
//   - a stale or invalid EndpointId: dispatch -> inactive handle, load -> zeros, fill -> no
//     metrics, installScrape/setCapacity/remove -> false.
//
// Cost and locking
//   Endpoints are registered up front or rarely (registerEndpoint, removeEndpoint: a mutex and,
//   for a new slot, an allocation of a chunk of 64 slots). Slots never move: an EndpointId is an
//   index plus a generation, so dispatch, release, installScrape and fill touch only the
//   endpoint's own two 64-byte cache lines, with atomics: a dispatch is two atomic adds, a
//   completion two more; readers take a consistent snapshot of the four counters (dispatches
//   read before and after the completions; under a storm of concurrent dispatches in flight may
//   briefly err high, never negative). The scrape is published with a per-slot sequence lock:
//   fill never blocks, installScrape never blocks fill. No allocation after registration.
//   By-name calls (find, load(name), the name overloads of fill) take a shared lock over a hash
//   index; use ids on hot paths.
//
// Requests in flight by priority (options.priorityLevels, for EndpointPicker's priority routing)
//   With priority levels (fixed at construction), each endpoint also counts, per level, the
//   requests dispatched with a priority (dispatch, recordDispatch and recordCompletion with a
//   priority) and not yet completed. A request counts at the highest level at or below its
//   priority (below every level: the lowest). inFlightAtOrAbove(p) sums the levels >= p: for a
//   request whose priority is a level, the requests in flight of its priority or above. Requests
//   dispatched without a priority are not in these counts (dispatch every request with one). The
//   counts are this replica's own (the replica feed and sync do not carry levels). The levels'
//   counters are allocated with the endpoint's slot (registration); dispatch, completion and
//   inFlightAtOrAbove by id are lock-free and allocate nothing.
//
// Lifetime: handles point into the ledger; release (or destroy) them before the ledger.
// Thread safety: thread-safe; every member may be called concurrently.
#pragma once

#include "holdback/abi.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "holdback/core/diagnostics.hpp"
#include "holdback/detector/detail/ledger_slot.hpp"
#include "holdback/detector/dispatch_handle.hpp"
#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

// An endpoint's slot in a DispatchLedger. Default-constructed: invalid.
struct EndpointId {
  static constexpr std::uint32_t kInvalidIndex = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t index = kInvalidIndex;
  std::uint32_t generation = 0;
  [[nodiscard]] constexpr bool valid() const noexcept { return index != kInvalidIndex; }
  friend constexpr bool operator==(EndpointId, EndpointId) = default;
};

// What the host knows about an endpoint's capacity; 0 = unknown.
struct EndpointCapacity {
  // vLLM's --max-num-seqs: how many requests run at once; beyond it they wait.
  std::int64_t maxRunningRequests = 0;
  // KV-cache capacity in tokens (vLLM logs "GPU KV cache size: N tokens").
  std::int64_t kvCapacityTokens = 0;
};

// One scrape of an endpoint's metrics (vLLM /metrics).
struct Scrape {
  TimePoint updateTime;           // when the metrics were taken, on the host's clock
  double waitingQueueSize = 0.0;  // vllm:num_requests_waiting
  double runningRequests = 0.0;   // vllm:num_requests_running
  double kvCacheUsage = 0.0;      // vllm:kv_cache_usage_perc, a fraction in [0, 1]
};

// The counters of one endpoint at one moment.
struct ScrapeMark {
  std::uint64_t dispatchedRequests = 0;
  std::uint64_t dispatchedTokens = 0;
  std::uint64_t completedRequests = 0;
  std::uint64_t completedTokens = 0;
  // The other replicas' dispatches and completions this replica has been told of (the replica
  // feed: recordPeerDispatch, recordPeerCompletion).
  std::uint64_t peerDispatchedRequests = 0;
  std::uint64_t peerDispatchedTokens = 0;
  std::uint64_t peerCompletedRequests = 0;
  std::uint64_t peerCompletedTokens = 0;
};

struct InFlightLoad {
  std::int64_t requests = 0;
  std::int64_t tokens = 0;
};

struct DispatchLedgerOptions {
  // Correct the scraped figures with the dispatches the scrape cannot have seen.
  bool correction = true;
  // scrapeMarginRequests, slotCountFromScrapes, creditCompletions and reconcileInFlight are
  // experiment switches, no configuration keys (deprecated in files, still applied; the
  // simulator's ledger ablations set them); budgetQueueDepth follows the detector in a file.
  // Without a ScrapeMark: dispatches just before installScrape assumed not yet seen by the
  // server (requests on the wire when it sampled its metrics); >= 0.
  std::int64_t scrapeMarginRequests = 0;
  // The per-scrape dispatch budget (see the header comment); off by default.
  bool dispatchBudget = false;
  // The budget's free queue, and the waiting figure written for an endpoint whose budget is
  // spent; > 0. Set it to the utilization detector's queueDepthThreshold.
  std::int64_t budgetQueueDepth = 5;
  // When EndpointCapacity::maxRunningRequests is not configured, take the largest running
  // figure the endpoint's scrapes have shown (cut back to the running figure of a scrape that
  // shows a queue) as its slot count (see the header comment). Off: pending work counts as
  // waiting whenever the slot count is not configured.
  bool slotCountFromScrapes = true;
  // Completions beyond the dispatches since the scrape (requests the scrape still showed) lower
  // the scraped figures: waiting first (the server refills its slots from its queue), then
  // running, never below 0 (see the header comment). Off (the default): they never lower them,
  // and freed capacity shows at the next scrape.
  bool creditCompletions = false;
  // Requests in flight at the scrape's baseline that the scrape does not show (its running +
  // waiting is below this replica's in-flight count at the baseline) were still on their way to
  // the server when it sampled its metrics: count them as pending (see the header comment).
  // Off: every dispatch before the baseline is taken as seen by the scrape.
  bool reconcileInFlight = true;
  // Gateway replicas that dispatch to the same endpoints, each with its own ledger (it sees only
  // its own dispatches; all read the same scrapes); in [1, kMaxReplicas]. The correction assumes
  // every replica dispatched as much since the scrape as this one (arrivals spread evenly):
  // pending work counts `replicas` times, and the budget is split evenly (a replica's spend
  // counts `replicas` times against it).
  std::int64_t replicas = 1;
  static constexpr std::int64_t kMaxReplicas = 1024;
  // Free slots per endpoint the split leaves to every replica (the first ones, not divided);
  // >= 0. With a policy that keeps a reserve of free slots for its top band (the reservation
  // policy's minReserve), set it to that reserve per endpoint: every replica then sees the
  // reserve (so its policy keeps the lower bands out of it and its top band may use it), and only
  // the room above it is divided; 0 divides all of it.
  std::int64_t sharedRoomSlots = 0;
  // Count requests in flight per priority level (see "Requests in flight by priority"); at most
  // kMaxPriorityLevels distinct values, in any order (the rest are ignored). Empty (the
  // default): no per-priority counts. Not a file key: the host sets it from its priority bands.
  std::vector<Priority> priorityLevels;
  static constexpr std::size_t kMaxPriorityLevels = 64;
};

class HOLDBACK_API DispatchLedger {
 public:
  static constexpr std::size_t kChunkSize = 64;
  static constexpr std::size_t kMaxChunks = 1024;
  static constexpr std::size_t kMaxEndpoints = kChunkSize * kMaxChunks;  // 65536 slots
  // Larger per-request token counts are clamped to this (2^40).
  static constexpr std::int64_t kMaxTokensPerRequest = std::int64_t{1} << 40;
  // Larger configured slot counts (EndpointCapacity::maxRunningRequests) are clamped to this
  // (2^32 - 1: no server runs that many; the ledger stores it in 32 bits).
  static constexpr std::int64_t kMaxConfiguredSlots = 0xFFFFFFFF;
  // Larger scraped running figures raise the observed slot count only to this (2^16; vLLM's
  // --max-num-seqs defaults to 256 or 1024), so that a server reporting absurd figures cannot
  // make every dispatch read as a free slot's.
  static constexpr std::int64_t kMaxObservedSlots = std::int64_t{1} << 16;

  // Invalid options are sanitized (negative margin -> 0, budgetQueueDepth <= 0 -> 1, priority
  // levels sorted, deduplicated and cut at kMaxPriorityLevels); use
  // validate() to report them instead.
  explicit DispatchLedger(DispatchLedgerOptions options = {}) noexcept;
  ~DispatchLedger();
  DispatchLedger(const DispatchLedger&) = delete;
  DispatchLedger& operator=(const DispatchLedger&) = delete;

  // Appends one diagnostic per invalid field; `path` is the JSON pointer of the options object.
  static void validate(const DispatchLedgerOptions& options, const std::string& path,
                       Diagnostics& diagnostics);
  [[nodiscard]] const DispatchLedgerOptions& options() const noexcept { return options_; }

  // ---- registration (rare; may allocate; not on the hot path) ----
  // The id of `name`, registering it if unknown (an existing registration keeps its capacity
  // unless `capacity` is given). Invalid id when the ledger is full (kMaxEndpoints live or
  // draining slots) or allocation failed.
  EndpointId registerEndpoint(std::string_view name,
                              std::optional<EndpointCapacity> capacity = std::nullopt) noexcept;
  // The live id of `name`, or nullopt.
  [[nodiscard]] std::optional<EndpointId> find(std::string_view name) const noexcept;
  bool setCapacity(EndpointId id, EndpointCapacity capacity) noexcept;
  // Retires the endpoint (see "Bad input"). False when the id (name) is not live.
  bool removeEndpoint(EndpointId id) noexcept;
  bool removeEndpoint(std::string_view name) noexcept;

  // ---- events (hot path: O(1), lock-free, no allocation) ----
  DispatchHandle dispatch(EndpointId id, std::int64_t tokens = 0) noexcept;
  // Handle-free events, for hosts that track request lifetimes themselves (a simulator). Return
  // false for a stale id; recordCompletion also when it would complete more requests than were
  // dispatched (dropped; tokens likewise capped at the tokens dispatched).
  bool recordDispatch(EndpointId id, std::int64_t tokens = 0) noexcept;
  bool recordCompletion(EndpointId id, std::int64_t tokens = 0) noexcept;
  // The same, counted at `priority`'s level too (options.priorityLevels; without levels, the
  // calls above). Complete a request dispatched with a priority with the same priority.
  DispatchHandle dispatch(EndpointId id, std::int64_t tokens, Priority priority) noexcept;
  bool recordDispatch(EndpointId id, std::int64_t tokens, Priority priority) noexcept;
  bool recordCompletion(EndpointId id, std::int64_t tokens, Priority priority) noexcept;

  // ---- scrapes ----
  // The counters now: take it just before sending a scrape request and pass it to installScrape.
  [[nodiscard]] ScrapeMark mark(EndpointId id) const noexcept;
  bool installScrape(EndpointId id, const Scrape& scrape) noexcept;
  bool installScrape(EndpointId id, const Scrape& scrape, const ScrapeMark& mark) noexcept;

  // ---- reads ----
  [[nodiscard]] InFlightLoad load(EndpointId id) const noexcept;
  [[nodiscard]] InFlightLoad load(std::string_view name) const noexcept;
  // Dispatches since the last scrape's baseline, and what the budget allows this replica (its
  // share: ceil(budget / replicas); nullopt: no scrape or stale id). For diagnostics and tests.
  struct BudgetState {
    std::int64_t dispatchedSinceScrape = 0;
    std::int64_t budget = 0;
  };
  [[nodiscard]] std::optional<BudgetState> budgetState(EndpointId id) const noexcept;
  // ---- replica sync (replica_sync.hpp; called by the host's sync thread, not on the hot path,
  // lock-free, no allocation) ----
  // This replica's pending work on `id` since its last scrape's baseline (dispatches less
  // completions, floored at 0): what it publishes to the other replicas. Zeros before the first
  // scrape or for a stale id.
  [[nodiscard]] InFlightLoad localPending(EndpointId id) const noexcept;
  // The other replicas' pending work on `id` (their localPending, summed), used by fill in place
  // of the `replicas` share: pending = own + `others` + (R - 1) x this replica's dispatches
  // since this call, R = max(options.replicas, `replicas`) (the others' dispatches since the
  // sync are not in the sum yet; this replica's stand for theirs). creditCompletions does not
  // apply then. nullopt: none known (the store is unreachable): fill falls back to the
  // share, times max(options.replicas, `replicas`). `replicas`: the live replicas, this one
  // included, as last seen (0: unknown). `rank`: this replica's position among them in an order
  // every replica agrees on, in [0, replicas); with it the free room is split (see "The free
  // room split"); -1: not split. False for a stale id.
  bool setPeerPending(EndpointId id, std::optional<InFlightLoad> others, std::int64_t replicas = 0,
                      std::int64_t rank = -1) noexcept;
  // ---- replica feed (the other replicas' dispatches and completions as they happen; called by
  // the host's feed thread; lock-free, no allocation) ----
  // Another replica dispatched a request of `tokens` to `id`, or one of its requests there ended
  // (see "The replica feed" in the header comment). Negative tokens count as 0. False for a
  // stale id. Counted whether or not the feed is live; used by fill only while it is.
  bool recordPeerDispatch(EndpointId id, std::int64_t tokens = 0) noexcept;
  bool recordPeerCompletion(EndpointId id, std::int64_t tokens = 0) noexcept;
  // The replicas' shared clock less the clock of the scrapes' times (ReplicaSync::clockOffset;
  // the syncer installs it each round): the free room split's turn steps on it. 0 by default
  // (replicas on one host).
  void setReplicaClockOffset(Duration offset) noexcept {
    replica_clock_offset_.store(offset.count(), std::memory_order_relaxed);
  }
  [[nodiscard]] Duration replicaClockOffset() const noexcept {
    return Duration{replica_clock_offset_.load(std::memory_order_relaxed)};
  }
  // Whether the host's feed is live (it delivers every other replica's events); off by default.
  // Live: fill counts this replica's and the other replicas' pending work as one ledger would,
  // and ignores the `replicas` share and setPeerPending. Off (the feed is down): the rules
  // without it apply.
  void setPeerFeed(bool live) noexcept { peer_feed_.store(live, std::memory_order_relaxed); }
  [[nodiscard]] bool peerFeed() const noexcept {
    return peer_feed_.load(std::memory_order_relaxed);
  }
  // The slot count fill uses for `id`: the configured maxRunningRequests, else the observed slot
  // count (0: unknown, or a stale id; see the header comment). For diagnostics and tests.
  [[nodiscard]] std::int64_t slotCount(EndpointId id) const noexcept;

  // Writes every telemetry field but name/weight/role, and the in-flight counts, of
  // endpoints[k] from ids[k] (see "The algorithm"). The spans must have the same size (extra
  // elements of the longer one are left alone). O(n), no lock, no allocation.
  void fill(std::span<Endpoint> endpoints, std::span<const EndpointId> ids) const noexcept;
  // The same by Endpoint::name (a shared lock and a lookup per endpoint; unknown names get no
  // metrics and zero counts).
  void fill(std::span<Endpoint> endpoints) const noexcept;
  // Only inFlightRequests/Tokens, by name (InFlightTracker::fill).
  void fillInFlight(std::span<Endpoint> endpoints) const noexcept;
  // out[k] = the requests in flight on ids[k] at the priority levels >= `priority` (see
  // "Requests in flight by priority"; 0 for a stale id or without levels). Lock-free, no
  // allocation; writes min(ids.size(), out.size()) entries. By Endpoint::name: a shared lock and
  // a lookup per endpoint (unknown names read 0).
  void inFlightAtOrAbove(std::span<const EndpointId> ids, Priority priority,
                         std::span<std::int64_t> out) const noexcept;
  void inFlightAtOrAbove(std::span<const Endpoint> endpoints, Priority priority,
                         std::span<std::int64_t> out) const noexcept;

 private:
  using Chunk = std::array<detail::LedgerSlot, kChunkSize>;
  [[nodiscard]] detail::LedgerSlot* slotOf(EndpointId id) const noexcept;
  [[nodiscard]] std::optional<std::uint32_t> indexOf(std::string_view name) const noexcept;
  // The slot at a registered index (the caller holds registry_mutex_).
  [[nodiscard]] HOLDBACK_LOCAL detail::LedgerSlot& slotAt(std::uint32_t index) const noexcept;
  static void fillOne(Endpoint& e, const detail::LedgerSlot* slot,
                      const DispatchLedgerOptions& options, bool feed,
                      Duration clockOffset) noexcept;

  DispatchLedgerOptions options_;
  std::atomic<bool> peer_feed_{false};
  std::atomic<Duration::rep> replica_clock_offset_{0};
  std::array<std::atomic<Chunk*>, kMaxChunks> chunks_{};
  // Per chunk, kChunkSize x levels counters (options_.priorityLevels), slot-major; allocated with
  // the chunk when there are levels.
  std::array<std::atomic<detail::LevelCount*>, kMaxChunks> level_chunks_{};
  // Internal (their signatures name detail types): hidden from a shared library's exports.
  [[nodiscard]] HOLDBACK_LOCAL detail::LevelCount* levelsOf(EndpointId id) const noexcept;
  [[nodiscard]] HOLDBACK_LOCAL detail::LevelCount* levelsAt(std::uint32_t index) const noexcept;
  [[nodiscard]] HOLDBACK_LOCAL std::size_t levelIndex(Priority priority) const noexcept;
  [[nodiscard]] HOLDBACK_LOCAL std::int64_t atOrAbove(const detail::LevelCount* levels,
                                                      Priority priority) const noexcept;
  mutable std::shared_mutex registry_mutex_;
  std::unordered_map<std::string, std::uint32_t, detail::TransparentStringHash, std::equal_to<>>
      by_name_;                         // live names; guarded by registry_mutex_
  std::uint32_t slots_used_ = 0;        // guarded by registry_mutex_
  std::vector<std::string> names_;      // per slot index; guarded by registry_mutex_
  std::vector<std::uint32_t> retired_;  // guarded by registry_mutex_
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/detector/dispatch_ledger-inl.hpp"
#endif
