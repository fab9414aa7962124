// Turning exceptions from dependencies into a Status at public boundaries.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "rapidqa/status.h"

namespace rapidqa::detail {

// Runs fn() (which returns a Status or a Result) and converts any exception
// into an internal error naming what was being done.
template <typename Fn>
auto guarded(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return Status::resource_exhausted(std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return Status::internal(std::string(what) + ": " + e.what());
  } catch (...) {
    return Status::internal(std::string(what) + ": unknown exception");
  }
}

}  // namespace rapidqa::detail
