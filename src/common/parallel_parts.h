// Splitting one long job (parsing a million stored entries, hashing a
// gigabyte snapshot, encoding two million rows) over a few threads for the
// duration of one call, on the caller's thread plus short-lived helpers:
// the work runs once at start-up, where a pool would sit idle afterwards.
//
// An exception in any part (bad_alloc) reaches the caller after every
// started thread has been joined, as if the parts had run in a loop; a
// helper that cannot be started leaves its parts to the threads that were.
//
// Thread safety: `work` is called concurrently with distinct part numbers.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace rapidqa::detail {

// A thread count for `items` items: one per core, at most `max_threads`,
// and none beyond one per `min_items_per_thread`.
inline std::size_t threads_for(std::size_t items, std::size_t min_items_per_thread, std::size_t max_threads = 8) {
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::max<std::size_t>(1, std::min({cores, max_threads, items / std::max<std::size_t>(1, min_items_per_thread)}));
}

// Calls work(part) for every part in [0, parts), on up to `threads` threads.
template <typename Work>
void run_parts(std::size_t parts, std::size_t threads, Work&& work) {
  std::atomic<std::size_t> next{0};
  std::mutex failure_mu;
  std::exception_ptr failure;
  const auto worker = [&] {
    try {
      for (std::size_t part; (part = next.fetch_add(1)) < parts;) work(part);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mu);
      if (!failure) failure = std::current_exception();
      next = parts;  // the others stop at their next part
    }
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < std::min(threads, parts); ++t) {
    try {
      helpers.emplace_back(worker);
    } catch (...) {
      break;  // no more threads to be had: the ones running share the parts
    }
  }
  worker();
  for (std::thread& helper : helpers) helper.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace rapidqa::detail
