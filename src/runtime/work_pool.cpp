#include "runtime/work_pool.h"

#include <omp.h>
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace rapidqa::runtime {
namespace {

// One word holds the whole claim state of the current call, so a worker's
// compare-and-swap both claims a task and proves the call it read is still
// the current one: generation (24 bits) | task count (20) | next task (20).
constexpr int kIndexBits = 20;
constexpr std::uint64_t kIndexMask = (std::uint64_t{1} << kIndexBits) - 1;
constexpr std::int64_t kMaxTasksPerCall = static_cast<std::int64_t>(kIndexMask);

std::uint64_t pack(std::uint64_t generation, std::uint64_t count, std::uint64_t next) {
  return (generation << (2 * kIndexBits)) | (count << kIndexBits) | next;
}
std::uint64_t generation_of(std::uint64_t s) { return s >> (2 * kIndexBits); }
std::uint64_t count_of(std::uint64_t s) { return (s >> kIndexBits) & kIndexMask; }
std::uint64_t next_of(std::uint64_t s) { return s & kIndexMask; }

// How long an idle worker keeps looking for the next call before it
// sleeps. A forward pass issues its products back to back (gaps of a few
// microseconds); between requests the workers sleep and cost nothing.
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(100);
// How long the caller spins for a task another thread is finishing before
// it yields its core (which may be the one that thread needs).
constexpr auto kSpinBeforeYield = std::chrono::microseconds(20);

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

thread_local bool t_inside_task = false;

// Counts a caller in for as long as it is inside run().
class CallerCount {
 public:
  explicit CallerCount(std::atomic<int>& callers)
      : callers_(callers), inside_now_(callers.fetch_add(1, std::memory_order_relaxed) + 1) {}
  ~CallerCount() { callers_.fetch_sub(1, std::memory_order_relaxed); }
  CallerCount(const CallerCount&) = delete;
  CallerCount& operator=(const CallerCount&) = delete;

  int inside_now() const { return inside_now_; }  // this caller included

 private:
  std::atomic<int>& callers_;
  const int inside_now_;
};

// Limits OpenMP (hence oneDNN and OpenBLAS's OpenMP builds) to the calling
// thread while tasks run, and puts the caller's setting back.
class SingleThreadedOpenMp {
 public:
  SingleThreadedOpenMp() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~SingleThreadedOpenMp() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  SingleThreadedOpenMp(const SingleThreadedOpenMp&) = delete;
  SingleThreadedOpenMp& operator=(const SingleThreadedOpenMp&) = delete;

 private:
  int previous_;
};

// Spins until done() or the budget is spent; returns done().
template <typename Predicate>
bool spin_for(Predicate done, std::chrono::microseconds budget) {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    _mm_pause();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > budget) return done();
  }
}

}  // namespace

struct WorkPool::Shared {
  int threads = 1;
  std::int64_t crowded_hold_ns = 0;
  std::mutex call_mu;  // held by the one call that uses the workers
  std::atomic<std::uint64_t> state{0};
  std::atomic<const std::function<void(std::int64_t)>*> task{nullptr};
  std::atomic<std::int64_t> done{0};

  // Outer callers inside run() now, and the steady-clock time (ns) until
  // which the pool counts as crowded.
  std::atomic<int> callers{0};
  std::atomic<std::int64_t> crowded_until_ns{0};

  bool crowded(std::int64_t now_ns) const {
    return now_ns < crowded_until_ns.load(std::memory_order_relaxed);
  }

  std::mutex sleep_mu;
  std::condition_variable wake;
  std::atomic<int> sleeping{0};
  bool stop = false;  // guarded by sleep_mu
  std::vector<std::thread> workers;

  // Claims and runs tasks of the call with this generation until none is
  // left. Returns how many it ran.
  std::int64_t work_on(std::uint64_t generation) {
    std::int64_t ran = 0;
    std::uint64_t s = state.load(std::memory_order_acquire);
    while (generation_of(s) == generation && next_of(s) < count_of(s)) {
      // Read the task before claiming: a successful claim proves the call
      // was still unfinished, so its task was not yet replaced.
      const auto* fn = task.load(std::memory_order_acquire);
      if (state.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        (*fn)(static_cast<std::int64_t>(next_of(s)));
        done.fetch_add(1, std::memory_order_acq_rel);
        ++ran;
        s = state.load(std::memory_order_acquire);
      }
    }
    return ran;
  }

  void worker_loop() {
    omp_set_num_threads(1);
    t_inside_task = true;
    // Generation 0 is the pool's state at construction: a call published
    // before this thread got going is then still seen as new.
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t s = 0;
      // While the pool is crowded no call wants the workers: sleep at once.
      const auto budget = crowded(steady_now_ns()) ? std::chrono::microseconds(0) : kSpinBeforeSleep;
      const bool called = spin_for(
          [&] { return generation_of(s = state.load(std::memory_order_acquire)) != seen; }, budget);
      if (!called) {
        std::unique_lock<std::mutex> lock(sleep_mu);
        sleeping.fetch_add(1);
        wake.wait(lock, [&] { return stop || generation_of(state.load()) != seen; });
        sleeping.fetch_sub(1);
        if (stop) return;
        s = state.load(std::memory_order_acquire);
      }
      seen = generation_of(s);
      work_on(seen);
    }
  }
};

WorkPool::WorkPool(int threads, std::chrono::nanoseconds crowded_hold) : shared_(std::make_unique<Shared>()) {
  shared_->threads = std::max(1, threads);
  shared_->crowded_hold_ns = crowded_hold.count();
  for (int i = 1; i < shared_->threads; ++i) {
    shared_->workers.emplace_back([s = shared_.get()] { s->worker_loop(); });
  }
}

WorkPool::~WorkPool() {
  {
    std::lock_guard<std::mutex> lock(shared_->sleep_mu);
    shared_->stop = true;
    // A spinning worker must see a new generation to reach the wait.
    shared_->state.store(pack(generation_of(shared_->state.load()) + 1, 0, 0));
  }
  shared_->wake.notify_all();
  for (auto& t : shared_->workers) t.join();
}

int WorkPool::threads() const { return shared_->threads; }

void WorkPool::run(std::int64_t count, const std::function<void(std::int64_t)>& task) {
  if (count <= 0) return;
  if (count > kMaxTasksPerCall) {
    // Group indices so the claim word can count them.
    const std::int64_t group = (count + kMaxTasksPerCall - 1) / kMaxTasksPerCall;
    run((count + group - 1) / group, [&](std::int64_t g) {
      for (std::int64_t i = g * group; i < std::min(count, (g + 1) * group); ++i) task(i);
    });
    return;
  }
  SingleThreadedOpenMp single;
  Shared& s = *shared_;
  const auto run_alone = [&] {
    const bool was_inside = t_inside_task;
    t_inside_task = true;
    for (std::int64_t i = 0; i < count; ++i) task(i);
    t_inside_task = was_inside;
  };
  if (count == 1 || s.threads == 1 || t_inside_task) return run_alone();
  const CallerCount caller(s.callers);
  const std::int64_t now_ns = steady_now_ns();
  if (caller.inside_now() >= s.threads) {
    s.crowded_until_ns.store(now_ns + s.crowded_hold_ns, std::memory_order_relaxed);
  }
  std::unique_lock<std::mutex> call(s.call_mu, std::defer_lock);
  if (s.crowded(now_ns) || !call.try_lock()) return run_alone();
  const std::uint64_t generation = (generation_of(s.state.load()) + 1) & ((std::uint64_t{1} << 24) - 1);
  s.task.store(&task, std::memory_order_relaxed);
  s.done.store(0, std::memory_order_relaxed);
  s.state.store(pack(generation, static_cast<std::uint64_t>(count), 0));  // seq_cst: ordered before `sleeping`
  if (s.sleeping.load() > 0) {
    std::lock_guard<std::mutex> lock(s.sleep_mu);
    s.wake.notify_all();
  }
  t_inside_task = true;
  s.work_on(generation);
  t_inside_task = false;
  const auto all_done = [&] { return s.done.load(std::memory_order_acquire) == count; };
  if (!spin_for(all_done, kSpinBeforeYield)) {
    while (!all_done()) sched_yield();
  }
}

namespace {

// One process-wide pool, created on first use with `initial` threads and
// replaced by resize(); calls in flight finish on the pool they started on.
class PoolSlot {
 public:
  std::shared_ptr<WorkPool> get(int initial) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pool_) pool_ = std::make_shared<WorkPool>(initial);
    return pool_;
  }
  void resize(int threads) {
    std::shared_ptr<WorkPool> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pool_ && pool_->threads() == threads) return;
      old = std::move(pool_);
      pool_ = std::make_shared<WorkPool>(threads);
    }
    // `old` is joined here, outside the lock, once its last caller lets go.
  }

 private:
  std::mutex mu_;
  std::shared_ptr<WorkPool> pool_;  // guarded by mu_
};

PoolSlot g_compute_pool, g_search_pool;

}  // namespace

std::shared_ptr<WorkPool> compute_pool() {
  return g_compute_pool.get(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

void resize_compute_pool(int threads) { g_compute_pool.resize(threads); }

std::shared_ptr<WorkPool> search_pool() { return g_search_pool.get(1); }

void resize_search_pool(int threads) { g_search_pool.resize(threads); }

namespace {

std::mutex g_slots_mu;
std::condition_variable g_slot_freed;
int g_slots_taken = 0;  // guarded by g_slots_mu

}  // namespace

ComputeCallSlot::ComputeCallSlot() {
  const int slots = compute_pool()->threads();
  std::unique_lock<std::mutex> lock(g_slots_mu);
  g_slot_freed.wait(lock, [&] { return g_slots_taken < slots; });
  ++g_slots_taken;
}

ComputeCallSlot::~ComputeCallSlot() {
  {
    std::lock_guard<std::mutex> lock(g_slots_mu);
    --g_slots_taken;
  }
  g_slot_freed.notify_one();
}

void parallel_tasks(std::int64_t count, const std::function<void(std::int64_t)>& task) {
  compute_pool()->run(count, task);
}

void parallel_ranges(std::int64_t count, std::int64_t grain,
                     const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (count <= 0) return;
  if (count <= grain) {
    fn(0, count);
    return;
  }
  parallel_tasks((count + grain - 1) / grain, [&](std::int64_t i) {
    const std::int64_t begin = i * grain;
    fn(begin, std::min(count, begin + grain));
  });
}

}  // namespace rapidqa::runtime
