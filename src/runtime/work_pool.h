// WorkPool: the model runtime's own intra-op threads. One call,
// run(count, task), runs task(i) for every i in [0, count) on the calling
// thread and the pool's workers together, and returns when all are done.
//
// Why not one OpenMP team per product: a team splits the work statically
// and waits at its barrier for its slowest thread, so when the host's own
// threads take a core, every product waits for a descheduled thread; and
// its idle threads spin, taking the core from whoever needs it. Here tasks
// are claimed one at a time from a shared counter, so a worker that is
// descheduled simply claims fewer, and the caller (always running) takes
// the rest; idle workers spin only briefly (a forward's products follow
// each other within microseconds) and then sleep.
//
// Several callers at once (two batches in their forward passes): once as
// many callers are inside run() as the pool has threads, the pool counts
// itself crowded for a moment (crowded_hold), and every call runs on its
// caller alone while the workers sleep. The callers' own threads already
// fill the cores; a worker spinning or woken beside them would only take a
// core from one of them. Alone, each caller pays no hand-off at all.
//
// Thread safety: run() may be called from any number of threads at once.
// One call at a time uses the workers; a call that finds them busy or the
// pool crowded, and a call made from inside a task, runs its tasks on the
// calling thread alone (never deadlocks, never waits for another caller's
// work).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace rapidqa::runtime {

class WorkPool {
 public:
  // threads: the threads a call may use, the caller included (so
  // threads - 1 workers are started); at least 1. crowded_hold: how long
  // the pool stays crowded after it last had `threads` callers at once.
  // Overlapping callers enter run() every few tens of microseconds, so a
  // millisecond without an overlap means they have gone.
  explicit WorkPool(int threads, std::chrono::nanoseconds crowded_hold = std::chrono::milliseconds(1));
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  int threads() const;

  // Runs task(i) for i in [0, count). Tasks must not throw; each runs
  // with OpenMP limited to one thread (oneDNN and OpenBLAS calls inside a
  // task run on that task's thread).
  void run(std::int64_t count, const std::function<void(std::int64_t)>& task);

 private:
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

// The process's pool, sized by configure_compute_threads (all cores until
// then). Resizing replaces it; calls in flight finish on the old one.
std::shared_ptr<WorkPool> compute_pool();
void resize_compute_pool(int threads);

// The pool batched vector searches spread their queries over, sized by
// ComputeThreads::search (one thread, no workers, until configured).
std::shared_ptr<WorkPool> search_pool();
void resize_search_pool(int threads);

// Holds one of the compute pool's call slots for its lifetime: at most as
// many model calls run at once as the compute pool has threads, and a
// caller past that waits for a slot. Two calls at once on two threads each
// run on their own thread (the pool counts itself crowded), which is how a
// busy engine keeps both cores on useful work; more would only share the
// cores and each hold its own activation buffers.
class ComputeCallSlot {
 public:
  ComputeCallSlot();
  ~ComputeCallSlot();
  ComputeCallSlot(const ComputeCallSlot&) = delete;
  ComputeCallSlot& operator=(const ComputeCallSlot&) = delete;
};

// Shorthand: compute_pool()->run(count, task).
void parallel_tasks(std::int64_t count, const std::function<void(std::int64_t)>& task);

// Runs fn(begin, end) over [0, count) cut into ranges of `grain` (the last
// shorter) on the compute pool; a count within one grain runs on the
// calling thread.
void parallel_ranges(std::int64_t count, std::int64_t grain,
                     const std::function<void(std::int64_t, std::int64_t)>& fn);

}  // namespace rapidqa::runtime
