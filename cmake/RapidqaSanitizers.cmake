# Sanitizer and fuzzing builds (docs/hardening.md, "Sanitizers and fuzzing").
#
#   RAPIDQA_SANITIZE=address  AddressSanitizer + UndefinedBehaviorSanitizer
#   RAPIDQA_SANITIZE=thread   ThreadSanitizer
#   RAPIDQA_FUZZ=ON           (clang only) the libFuzzer targets of fuzz/; the
#                             whole tree is also built with ASan+UBSan and
#                             coverage instrumentation, so one build tree runs
#                             both the sanitized tests and the fuzzers.
#
# The flags go to everything this project compiles and links (library,
# tests, examples, benchmarks), so include this before the first target.
# LibTorch, FAISS, oneDNN and OpenBLAS come from Debian uninstrumented: ASan
# still sees their calls into malloc and the libc string functions; TSan
# cannot see their internal synchronisation, hence the suppressions in
# scripts/sanitizers/. Configure with CMAKE_BUILD_TYPE=Debug so assert()s
# stay on; the -O1 added here overrides Debug's -O0 (sanitized -O0 code
# would make the test suite several times slower).

set(RAPIDQA_SANITIZE "" CACHE STRING "Sanitizer build: empty (none), address (ASan+UBSan) or thread (TSan)")
set_property(CACHE RAPIDQA_SANITIZE PROPERTY STRINGS "" address thread)
option(RAPIDQA_FUZZ "Build the libFuzzer targets in fuzz/ (clang; implies RAPIDQA_SANITIZE=address)" OFF)

if(RAPIDQA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "RAPIDQA_FUZZ needs clang (libFuzzer): configure with CC=clang CXX=clang++")
  endif()
  if(RAPIDQA_SANITIZE STREQUAL "")
    set(RAPIDQA_SANITIZE address CACHE STRING "" FORCE)
  elseif(NOT RAPIDQA_SANITIZE STREQUAL "address")
    message(FATAL_ERROR "RAPIDQA_FUZZ builds with ASan+UBSan; it cannot be combined with RAPIDQA_SANITIZE=${RAPIDQA_SANITIZE}")
  endif()
endif()

# What a program linking an installed sanitizer build needs too (the
# runtime the instrumented libraries call into): RAPIDQA_SANITIZE_LINK_OPTIONS
# for the exported CMake targets, RAPIDQA_SANITIZE_LINK_FLAGS for rapidqa.pc.
set(RAPIDQA_SANITIZE_LINK_OPTIONS "")
set(RAPIDQA_SANITIZE_LINK_FLAGS "")
if(RAPIDQA_SANITIZE STREQUAL "")
  return()
endif()

set(_rapidqa_sanitize_common -fno-omit-frame-pointer -O1 -g)
if(RAPIDQA_SANITIZE STREQUAL "address")
  # -fno-sanitize-recover: a UBSan finding stops the program (and fails the
  # test) instead of printing a line that nobody reads. UBSan's vptr check
  # stays on: it was tried against the uninstrumented Debian LibTorch
  # (torch::jit::load, tensors, c10::Error) without a false report. Should
  # one appear in LibTorch's types, add -fno-sanitize=vptr here.
  set(_rapidqa_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Catches use of a local after its scope ends (on by default in newer
    # clang; spelled out for clang 14).
    list(APPEND _rapidqa_sanitize_flags -fsanitize-address-use-after-scope)
  endif()
elseif(RAPIDQA_SANITIZE STREQUAL "thread")
  set(_rapidqa_sanitize_flags -fsanitize=thread)
else()
  message(FATAL_ERROR "RAPIDQA_SANITIZE must be empty, 'address' or 'thread', not '${RAPIDQA_SANITIZE}'")
endif()

add_compile_options(${_rapidqa_sanitize_flags} ${_rapidqa_sanitize_common})
add_link_options(${_rapidqa_sanitize_flags})
set(RAPIDQA_SANITIZE_LINK_OPTIONS ${_rapidqa_sanitize_flags})
string(JOIN " " RAPIDQA_SANITIZE_LINK_FLAGS ${_rapidqa_sanitize_flags})
if(CMAKE_C_COMPILER_ID MATCHES "Clang")
  # A C program linked by clang gets UBSan's C runtime only, but it links
  # our C++ library, whose vptr and function checks need the C++ one (and
  # that runtime needs libstdc++ on the command line).
  # One quoted argument: unquoted, add_link_options would split the
  # expression at its ';'. pkg-config has no link language to ask, so its
  # flags always carry the runtime.
  set(_rapidqa_cxx_runtime_for_c "$<$<LINK_LANGUAGE:C>:-fsanitize-link-c++-runtime;-lstdc++>")
  add_link_options("${_rapidqa_cxx_runtime_for_c}")
  list(APPEND RAPIDQA_SANITIZE_LINK_OPTIONS "${_rapidqa_cxx_runtime_for_c}")
  string(APPEND RAPIDQA_SANITIZE_LINK_FLAGS " -fsanitize-link-c++-runtime -lstdc++")
endif()
if(RAPIDQA_FUZZ)
  # Coverage instrumentation for libFuzzer without its main(): the library,
  # tests and tools stay ordinary programs; only the fuzz targets link
  # -fsanitize=fuzzer (fuzz/CMakeLists.txt).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
message(STATUS "rapidqa: sanitizer build: ${_rapidqa_sanitize_flags}; fuzz targets: ${RAPIDQA_FUZZ}")
