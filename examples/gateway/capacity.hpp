// What the gateway knows of each model server's capacity, and where it learned it: the slot
// count (requests that run at once, vLLM's --max-num-seqs) and the KV-cache capacity in tokens.
// The Pool installs both in its DispatchLedger (DispatchLedger::setCapacity), from which the
// detector's room (SaturationDetector::room), the reservation policy's capacity model and the
// fitFirst EndpointPicker read them.
//
// The algorithm
//   Slots, by precedence (docs/guide/gateway.md, "Capacity learning"):
//     1. the endpoint's own setting (--endpoint URL,slots=N);
//     2. the pool-wide default (--endpoint-slots N);
//     3. the utilization detector's maxRunningRequests in the config;
//     4. the engine's own slot gauge, when its metric dialect has one (TensorRT-LLM's maximum
//        request count), while it reads an integer in [1, kMaxConfiguredSlots];
//     5. else an estimate from the scrapes: S = the most requests any scrape showed running (a
//        lower bound that only grows). Until a scrape shows a queue (waiting >= 0.5) with S
//        running, the slot count in use is S + 1 + probeReserve: one probe beyond what was shown
//        and beyond the reserve's free slots, so that a reserve counted in free slots still lets
//        work through to show more (counted exactly at S it would never dispatch past it, and
//        every band below the top would wait); once a queue has shown at S running, S itself.
//        A later scrape showing more than S running raises S and probes again. Before the first
//        scrape the count is unknown (0: the ledger counts dispatches as waiting).
//   Whatever the source, the ledger counts at least probeReserve + 1 slots per endpoint: a
//   server with no more slots than the reserve would otherwise never run a request of any band
//   below the top (the reserve would be all of it); such a server may queue one of them.
//   A setting of 0 is not a slot count (it would admit nothing): it is ignored with one warning
//   and the next source applies.
//   KV capacity: vllm:cache_config_info's num_gpu_blocks x block_size (extractCacheConfigInfo),
//   as of the last successful scrape; without it, the engine's KV-capacity gauge when its metric
//   dialect has one (SGLang's max_total_num_tokens) and it reads an integer number of tokens in
//   [1, CacheConfigInfo::kMaxKvCapacityTokens] (a fraction is rounded down; NaN, 0, negative or
//   beyond: invalid, logged). Absent or invalid: unknown (0): the ledger and the
//   detector then read the KV term from vllm:kv_cache_usage_perc alone, as before; a failed
//   scrape changes nothing.
//   Every change is logged once, through the `log` callback: a new estimate, a new KV capacity,
//   a server that stops or starts exporting a valid cache_config_info (a repeated problem is not
//   logged again).
//
// Thread safety: thread-safe (one mutex, held only to copy and compare numbers; `log` is called
// after it is released).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "holdback/detector/dispatch_ledger.hpp"
#include "vllm_telemetry.hpp"

namespace holdback::gateway {

enum class SlotSource { kEndpointSetting, kPoolSetting, kConfig, kMetric, kEstimate };
enum class KvSource { kNotScraped, kCacheConfigInfo, kMetric, kAbsent, kInvalid };

// The label values /metrics uses: "endpoint", "pool", "config", "metric", "estimate";
// "not-scraped", "cache_config_info", "metric", "absent", "invalid".
[[nodiscard]] std::string_view toString(SlotSource source) noexcept;
[[nodiscard]] std::string_view toString(KvSource source) noexcept;

// One endpoint's slot settings from the command line and the config; 0 = not given.
struct SlotSettings {
  std::int64_t endpoint = 0;
  std::int64_t pool = 0;
  std::int64_t config = 0;
};

struct LearnedCapacity {
  std::int64_t slots = 0;  // in use: configured (kEndpointSetting..kConfig), else the estimate's
  SlotSource slotSource = SlotSource::kEstimate;
  std::int64_t kvCapacityTokens = 0;  // 0 = unknown
  KvSource kvSource = KvSource::kNotScraped;
  // The slot count a booking checks (--replica-mode reserve): the one the ledger counts (`slots`,
  // at least the reserve + 1; an estimate probes past the reserve until a queue confirms it), so
  // that a booking that leaves the reserve free can still let work through to grow the estimate.
  std::int64_t bookingSlots = 0;
};

class CapacityLearner {
 public:
  using Log = std::function<void(std::string_view)>;

  // One entry of `names` and `settings` per endpoint (same order). `probeReserve`: free slots a
  // reserve keeps (the reservation policy's minReserve, rounded up); the estimate's probe is that
  // many slots wider, so that the reserve cannot hold every band below it before the estimate
  // has grown.
  CapacityLearner(std::vector<std::string> names, const std::vector<SlotSettings>& settings,
                  Log log, std::int64_t probeReserve = 0);

  // The capacity to register endpoint i with before any scrape (slots configured, else 0).
  [[nodiscard]] EndpointCapacity initial(std::size_t i) const;

  // What an engine's metric dialect reports of its capacity (VllmTelemetry's reported* fields).
  struct Reported {
    std::optional<double> kvCapacityTokens;
    std::optional<double> slots;
  };

  // A successful scrape of endpoint i: its cache_config_info, its running and waiting figures
  // (NaN, infinite or negative ones teach nothing) and the capacity its engine reports. Returns
  // the capacity to install in the ledger when it changed (nullopt: unchanged).
  std::optional<EndpointCapacity> observe(std::size_t i, const CacheConfigInfo& info,
                                          double running, double waiting,
                                          const Reported& reported = {});

  [[nodiscard]] LearnedCapacity learned(std::size_t i) const;

 private:
  struct State {
    std::string name;
    LearnedCapacity now;
    std::string problem;           // the last invalid KV capacity's problem
    std::int64_t mostRunning = 0;  // the estimate's S
    bool confirmed = false;        // a scrape showed a queue at S running
  };
  // The estimate's slot count in use: S once a queue confirmed it, else S + 1 + probeReserve.
  [[nodiscard]] std::int64_t estimatedSlots(const State& s) const;
  // The slot count installed in the ledger: at least probeReserve + 1 (see the header).
  [[nodiscard]] std::int64_t counted(std::int64_t slots) const;
  Log log_;
  std::int64_t probe_reserve_ = 0;
  mutable std::mutex mu_;
  std::vector<State> states_;  // guarded by mu_
};

}  // namespace holdback::gateway
