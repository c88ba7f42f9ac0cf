// Loading the whole stack from an EndpointPickerConfig file and hot-reloading it.
//
//   config_reload [CONFIG [RELOADED_CONFIG]]
//
// Defaults: examples/configs/flow-control.yaml, then examples/configs/flow-control-reload.yaml.
// The file's concurrency-detector reads the gateway's own in-flight count against a fake pool of
// one server; its priority-holdback-policy keeps capacity for chat (10) over standard (0) and
// batch (-10). Halfway through, the second file is loaded and applied to the running controller:
// queued requests survive, and the new policy lets batch use the whole server. Time is simulated
// (10 ms steps, each request runs 30 ms), so the output is deterministic.
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "holdback/config/endpoint_picker_config.hpp"

using namespace holdback;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<const config::ConfigBundle> load(const std::string& file) {
  auto loaded = config::loadEndpointPickerConfigFile(file);
  for (const Diagnostic& d : loaded.diagnostics().all()) {
    std::printf("%s: %s: %s\n", file.c_str(), d.severity == Severity::kError ? "error" : "warning",
                d.toString().c_str());
  }
  if (!loaded) return nullptr;
  std::printf("%s: loaded\n%s", file.c_str(), config::describeBundle(*loaded.value()).c_str());
  return loaded.value();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = HOLDBACK_EXAMPLE_CONFIGS;
  const std::string first = argc > 1 ? argv[1] : dir + "/flow-control.yaml";
  const std::string second = argc > 2 ? argv[2] : dir + "/flow-control-reload.yaml";
  const auto bundle = load(first);
  if (!bundle) return 1;
  if (!bundle->flowControlEnabled) {
    std::printf("flow control is off: a gateway would admit everything\n");
    return 0;
  }

  // The host's pool: one server; the host counts its in-flight requests into the snapshot.
  auto pool = std::make_shared<VectorEndpointSource>(VectorEndpointSource::named(1, "vllm-"));
  const auto addInFlight = [&pool](std::int64_t delta) {
    pool->update(
        [delta](std::vector<Endpoint>& endpoints) { endpoints[0].inFlightRequests += delta; });
  };
  struct Running {
    std::string name;
    TimePoint doneAt;
  };
  std::vector<Running> running;
  std::size_t dispatched = 0, other = 0;
  TimePoint now{};
  FlowControllerOptions options = bundle->controller;
  options.endpoints = pool;
  options.onOutcome = [&](Completion&& c) {
    const auto name = std::any_cast<std::string>(c.payload);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(c.finalizedAt - TimePoint{});
    if (c.outcome.kind == QueueOutcome::kDispatched) {
      ++dispatched;
      addInFlight(1);
      running.push_back({name, c.finalizedAt + 30ms});
    } else {
      ++other;
    }
    std::printf("t=%3lldms %s %s (band %d)\n", static_cast<long long>(ms.count()),
                std::string(toString(c.outcome.kind)).c_str(), name.c_str(), c.bandPriority);
  };
  auto created = FlowController::create(std::move(options));
  if (!created) {
    std::printf("%s", created.diagnostics().toString().c_str());
    return 1;
  }
  FlowController& controller = *created.value();

  const auto submit = [&](const std::string& name, Priority priority) {
    FlowRequest r;
    r.flowId = name.substr(0, name.find('-'));
    r.priority = priority;
    r.sizeBytes = 1000;
    r.payload = name;
    controller.enqueue(std::move(r), now);
  };
  for (int i = 1; i <= 3; ++i) {
    submit("batch-" + std::to_string(i), -10);
    submit("std-" + std::to_string(i), 0);
    submit("chat-" + std::to_string(i), 10);
  }

  const auto step = [&] {
    for (auto it = running.begin(); it != running.end();) {
      if (it->doneAt <= now) {
        addInFlight(-1);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    for (;;) {
      const DispatchResult r = controller.dispatchCycle(now);
      if (r.kind == DispatchResult::Kind::kGated) {
        std::printf("t=%3lldms gated at priority %d (saturation %.2f)\n",
                    static_cast<long long>((now - TimePoint{}) / 1ms), r.priority, r.saturation);
      }
      if (r.kind != DispatchResult::Kind::kDispatched) break;
    }
    now += 10ms;
  };
  for (int i = 0; i < 4; ++i) step();

  if (const auto reloaded = load(second)) {
    const Diagnostics applied = config::applyBundle(controller, *reloaded);
    std::printf("reload: %s, queued requests kept: %zu\n",
                applied.hasErrors() ? "failed" : "applied", controller.stats().queuedRequests);
  }
  for (int i = 0; i < 8; ++i) step();
  controller.shutdown(now);
  std::printf("summary: dispatched=%zu other=%zu queued=%zu\n", dispatched, other,
              controller.stats().queuedRequests);
  return 0;
}
