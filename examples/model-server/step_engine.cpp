#include "step_engine.hpp"

#include <algorithm>
#include <cmath>

namespace holdback_examples {

StepEngine::Nanos StepEngine::fromMs(double ms) {
  return static_cast<Nanos>(std::llround(ms * 1e6));
}

void StepEngine::enqueue(Sequence& s, Nanos now, std::vector<Sequence*>& changed) {
  queue_.push_back(&s);
  admitHeads(now, changed);
}

void StepEngine::admitHeads(Nanos now, std::vector<Sequence*>& changed) {
  while (!queue_.empty()) {
    Sequence& head = *queue_.front();
    if (!holdback::sim::admitsHead(running_.size(), options_.slots, kv_in_use_, head.input,
                                   options_.kvCapacityTokens)) {
      break;
    }
    queue_.pop_front();
    head.running = true;
    head.admitted = now;
    head.firstToken = now + fromMs(options_.timing.prefillMs(head.input));
    head.generated = 1;
    kv_in_use_ += head.input;
    running_.push_back(&head);
    changed.push_back(&head);
  }
  if (!running_.empty() && !next_step_) {
    next_step_ = now + std::max<Nanos>(1, fromMs(options_.timing.tpotMs(running_.size())));
  }
}

void StepEngine::step(Nanos at, std::vector<Sequence*>& changed) {
  next_step_.reset();
  std::size_t kept = 0;
  for (Sequence* s : running_) {
    const bool started = s->firstToken <= at;
    bool touched = false;
    if (started && s->generated < s->output) {
      ++s->generated;
      ++kv_in_use_;
      touched = true;
    }
    if (started && s->generated >= s->output) {
      s->running = false;
      s->done = true;
      s->finished = at;
      kv_in_use_ -= s->input + s->generated - 1;
      touched = true;
    } else {
      running_[kept++] = s;
    }
    if (touched) changed.push_back(s);
  }
  running_.resize(kept);
  admitHeads(at, changed);
}

void StepEngine::remove(Sequence& s, Nanos now, std::vector<Sequence*>& changed) {
  if (s.done) return;
  if (s.running) {
    running_.erase(std::find(running_.begin(), running_.end(), &s));
    kv_in_use_ -= s.input + s.generated - 1;
    s.running = false;
  } else if (const auto it = std::find(queue_.begin(), queue_.end(), &s); it != queue_.end()) {
    queue_.erase(it);
  }
  s.done = true;
  s.finished = now;
  admitHeads(now, changed);
}

}  // namespace holdback_examples
