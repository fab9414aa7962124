# Every dependency comes from Debian 12 packages (see scripts/setup.sh).

# FAISS's CMake config expects OpenMP, BLAS and LAPACK to be found first.
find_package(OpenMP REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(LAPACK REQUIRED)
find_package(faiss REQUIRED)

find_package(Torch REQUIRED)
find_package(dnnl REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(utf8proc REQUIRED)
find_package(Threads REQUIRED)
# libcrypto: HMAC-SHA256 for keyed semantic-cache snapshots.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# hiredis ships a pkg-config file but no CMake config on Debian 12.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)

# TorchConfig puts its own flags into TORCH_CXX_FLAGS (the C++11 ABI switch);
# they must reach every translation unit that includes LibTorch.
separate_arguments(RAPIDQA_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")

set(RAPIDQA_PRIVATE_DEPS
  faiss ${TORCH_LIBRARIES} DNNL::dnnl fmt::fmt nlohmann_json::nlohmann_json
  utf8proc::utf8proc PkgConfig::HIREDIS OpenSSL::Crypto OpenMP::OpenMP_CXX ${BLAS_LIBRARIES} Threads::Threads)

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()
