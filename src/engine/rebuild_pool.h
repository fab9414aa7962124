// RebuildPool: a few owned threads that re-answer hot questions in the
// background after their cached answers were invalidated, so the next asker
// finds a fresh answer instead of paying for the miss. The queue is
// bounded: when it is full, new work is dropped and counted, never queued
// without limit.
//
// Thread safety: thread-safe. The destructor stops the workers and drops
// what is still queued.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rapidqa::engine {

class RebuildPool {
 public:
  RebuildPool(std::size_t workers, std::size_t queue_capacity);
  ~RebuildPool();
  RebuildPool(const RebuildPool&) = delete;
  RebuildPool& operator=(const RebuildPool&) = delete;

  // Queues a task; false (and counted as dropped) when the queue is full or
  // the pool has no workers.
  bool submit(std::function<void()> task);
  // Blocks until the queue is empty and no task is running.
  void drain();

  std::uint64_t completed() const { return completed_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  void run();

  const std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable work_ready_;             // signalled on submit and stop
  std::condition_variable idle_;                   // signalled when a task finishes
  std::deque<std::function<void()>> queue_;        // guarded by mu_
  std::size_t running_ = 0;                        // guarded by mu_
  bool stopping_ = false;                          // guarded by mu_
  std::atomic<std::uint64_t> completed_{0}, dropped_{0};
  std::vector<std::thread> workers_;
};

}  // namespace rapidqa::engine
