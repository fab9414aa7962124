// The runtime's WorkPool: every task runs exactly once, concurrent and
// nested callers finish, tasks run with OpenMP limited to their own thread,
// a stalled task does not hold back the others, a crowded pool leaves
// its callers alone, and model calls take slots.
#include <catch2/catch.hpp>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/work_pool.h"

using rapidqa::runtime::WorkPool;

TEST_CASE("WorkPool runs every task exactly once", "[work_pool]") {
  WorkPool pool(3);
  for (const std::int64_t count : {0, 1, 2, 3, 7, 64, 1000, 20000}) {
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(count));
    pool.run(count, [&](std::int64_t i) { runs[static_cast<std::size_t>(i)].fetch_add(1); });
    for (std::int64_t i = 0; i < count; ++i) REQUIRE(runs[static_cast<std::size_t>(i)].load() == 1);
  }
}

TEST_CASE("WorkPool calls from several threads at once all finish their own tasks", "[work_pool]") {
  WorkPool pool(2);
  constexpr int kCallers = 4, kCalls = 200, kTasks = 37;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      for (int call = 0; call < kCalls; ++call) {
        std::vector<std::atomic<int>> runs(kTasks);
        pool.run(kTasks, [&](std::int64_t i) { runs[static_cast<std::size_t>(i)].fetch_add(1); });
        for (auto& r : runs) wrong += r.load() != 1;
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("WorkPool runs a call made from inside a task on that task's thread", "[work_pool]") {
  WorkPool pool(2);
  std::atomic<int> inner{0};
  pool.run(4, [&](std::int64_t) {
    const auto self = std::this_thread::get_id();
    pool.run(5, [&](std::int64_t) {
      if (std::this_thread::get_id() == self) inner.fetch_add(1);
    });
  });
  CHECK(inner.load() == 20);
}

TEST_CASE("WorkPool tasks run with OpenMP limited to their own thread, and the caller's setting is kept", "[work_pool]") {
  WorkPool pool(2);
  omp_set_num_threads(2);
  std::atomic<int> wider{0};
  pool.run(16, [&](std::int64_t) { wider += omp_get_max_threads() != 1; });
  CHECK(wider.load() == 0);
  CHECK(omp_get_max_threads() == 2);
}

TEST_CASE("WorkPool: a stalled task does not hold back the rest", "[work_pool]") {
  // The first task claimed stalls (as a descheduled thread would); every
  // other task must be done by the other thread meanwhile.
  WorkPool pool(2);
  std::atomic<bool> stalled{false};
  std::atomic<int> done_while_stalled{0};
  std::atomic<bool> stall_over{false};
  pool.run(100, [&](std::int64_t) {
    if (!stalled.exchange(true)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      stall_over = true;
      return;
    }
    if (!stall_over) done_while_stalled.fetch_add(1);
  });
  CHECK(done_while_stalled.load() == 99);
}

TEST_CASE("The compute pool follows configure_compute_threads", "[work_pool]") {
  rapidqa::runtime::resize_compute_pool(3);
  CHECK(rapidqa::runtime::compute_pool()->threads() == 3);
  std::atomic<int> n{0};
  rapidqa::runtime::parallel_tasks(10, [&](std::int64_t) { n.fetch_add(1); });
  CHECK(n.load() == 10);
  rapidqa::runtime::resize_compute_pool(2);
  CHECK(rapidqa::runtime::compute_pool()->threads() == 2);
}

namespace {

// Makes `pool` crowded: another thread is inside run() (its tasks wait)
// while this one calls it too.
void overlap_two_callers(WorkPool& pool) {
  std::atomic<bool> inside{false}, release{false};
  std::thread other([&] {
    pool.run(2, [&](std::int64_t) {
      inside = true;
      while (!release) std::this_thread::yield();
    });
  });
  while (!inside) std::this_thread::yield();
  pool.run(2, [](std::int64_t) {});
  release = true;
  other.join();
}

// Runs four tasks, each waiting (up to `patience`) until tasks have run on
// two threads; returns the threads that ran them.
std::size_t threads_running(WorkPool& pool, std::chrono::milliseconds patience) {
  std::mutex mu;
  std::vector<std::thread::id> seen;
  pool.run(4, [&](std::int64_t) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (std::find(seen.begin(), seen.end(), std::this_thread::get_id()) == seen.end()) {
        seen.push_back(std::this_thread::get_id());
      }
    }
    const auto give_up = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < give_up) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (seen.size() >= 2) return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  return seen.size();
}

}  // namespace

TEST_CASE("WorkPool: after as many callers as threads at once, calls run on their caller alone", "[work_pool]") {
  // A worker's hand would be waited for (up to 50 ms a task): in a crowded
  // pool none comes, and every task runs on the calling thread.
  WorkPool pool(2, std::chrono::hours(1));
  CHECK(threads_running(pool, std::chrono::seconds(5)) == 2);  // not yet crowded: the worker helps
  overlap_two_callers(pool);
  CHECK(threads_running(pool, std::chrono::milliseconds(50)) == 1);
  CHECK(threads_running(pool, std::chrono::milliseconds(50)) == 1);
}

TEST_CASE("WorkPool: once the crowd has gone for the hold, the workers help again", "[work_pool]") {
  WorkPool pool(2, std::chrono::milliseconds(20));
  overlap_two_callers(pool);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  CHECK(threads_running(pool, std::chrono::seconds(5)) == 2);
}

TEST_CASE("ComputeCallSlot admits as many calls at once as the compute pool has threads", "[work_pool]") {
  rapidqa::runtime::resize_compute_pool(2);
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        const rapidqa::runtime::ComputeCallSlot slot;
        const int now = inside.fetch_add(1) + 1;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(most.load() == 2);
}
