// Symbol visibility for rapidqa's C++ API. The library is built with hidden
// visibility; only what carries RAPIDQA_EXPORT is part of the ABI.
#pragma once

#if defined(_WIN32)
#  if defined(RAPIDQA_BUILDING_LIBRARY)
#    define RAPIDQA_EXPORT __declspec(dllexport)
#  else
#    define RAPIDQA_EXPORT __declspec(dllimport)
#  endif
#else
#  define RAPIDQA_EXPORT [[gnu::visibility("default")]]
#endif
