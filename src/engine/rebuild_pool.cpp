#include "engine/rebuild_pool.h"

namespace rapidqa::engine {

RebuildPool::RebuildPool(std::size_t workers, std::size_t queue_capacity) : capacity_(queue_capacity) {
  for (std::size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { run(); });
}

RebuildPool::~RebuildPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped_.fetch_add(queue_.size(), std::memory_order_relaxed);
    queue_.clear();
  }
  work_ready_.notify_all();
  for (auto& w : workers_) w.join();
}

bool RebuildPool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (workers_.empty() || stopping_ || queue_.size() >= capacity_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queue_.push_back(std::move(task));
  }
  work_ready_.notify_one();
  return true;
}

void RebuildPool::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return (queue_.empty() && running_ == 0) || stopping_; });
}

void RebuildPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task();  // outside the lock: a task may take long and may submit nothing back
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    completed_.fetch_add(1, std::memory_order_relaxed);
    idle_.notify_all();
  }
}

}  // namespace rapidqa::engine
