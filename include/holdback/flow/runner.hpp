// FlowControllerRunner: a thread that drives a FlowController through its public API.
//
// The algorithm
//   The thread waits for an arrival (notifyArrival) or for tickInterval. It then runs
//   controller.expire(clock()) when expiryInterval has passed since the last sweep, and one
//   controller.dispatchCycle(clock()) per arrival counted since it last woke (at least one). It
//   stops on stop() or destruction. FlowController::create starts one when
//   options.runner.enabled (and notifies it from enqueue); a host that wants its own threads can
//   build one itself over a controller created without it.
//
// Locking
//   One small mutex for the arrival count and the stop flag, never held while the controller or
//   the clock is called. The runner calls only public FlowController methods, so it takes the
//   controller's locks exactly like any other client.
//
// Thread safety: thread-safe. stop() joins the thread unless called from the runner's own thread
// (e.g. from an outcome callback it delivered), in which case the thread ends after its current
// iteration and the destructor joins it.
#pragma once

#include "holdback/abi.hpp"

#include <cstddef>
#include <functional>
#include <thread>

#include "holdback/core/thread_annotations.hpp"
#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

class FlowController;

class HOLDBACK_API FlowControllerRunner {
 public:
  // Starts the thread. `controller` must outlive the runner (or the runner must be stopped
  // first); `clock` must be thread-safe.
  FlowControllerRunner(FlowController& controller, std::function<TimePoint()> clock,
                       Duration tickInterval, Duration expiryInterval);
  ~FlowControllerRunner();
  FlowControllerRunner(const FlowControllerRunner&) = delete;
  FlowControllerRunner& operator=(const FlowControllerRunner&) = delete;

  // One more dispatch cycle is wanted (a request arrived).
  void notifyArrival() noexcept HOLDBACK_EXCLUDES(mu_);
  // Stops and joins the thread (see the thread-safety note). Idempotent.
  void stop() noexcept HOLDBACK_EXCLUDES(mu_);

 private:
  void run() noexcept HOLDBACK_EXCLUDES(mu_);

  FlowController& controller_;
  const std::function<TimePoint()> clock_;
  const Duration tick_interval_;
  const Duration expiry_interval_;

  Mutex mu_;
  CondVar cv_;
  std::size_t pending_arrivals_ HOLDBACK_GUARDED_BY(mu_) = 0;
  bool stop_ HOLDBACK_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started after every other member is ready
};

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback

#ifdef HOLDBACK_HEADER_ONLY
#include "holdback/flow/runner-inl.hpp"
#endif
