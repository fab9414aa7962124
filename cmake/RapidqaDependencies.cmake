# Every dependency comes from Debian 12 packages (see scripts/setup.sh).

# FAISS's CMake config expects OpenMP, BLAS and LAPACK to be found first.
find_package(OpenMP REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(LAPACK REQUIRED)
find_package(faiss REQUIRED)

# LibTorch and oneDNN only for the models and tools components: the core
# builds and runs without them (-DRAPIDQA_WITH_MODELS=OFF).
if(RAPIDQA_WITH_MODELS)
  find_package(Torch QUIET)
  find_package(dnnl QUIET)
  if(NOT Torch_FOUND OR NOT dnnl_FOUND)
    message(FATAL_ERROR "RAPIDQA_WITH_MODELS needs LibTorch (libtorch-dev) and oneDNN (libdnnl-dev), which were "
                        "not found. Install them (scripts/setup.sh does), or configure with "
                        "-DRAPIDQA_WITH_MODELS=OFF to build rapidqa::core alone.")
  endif()
endif()
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(utf8proc REQUIRED)
find_package(Threads REQUIRED)
# The durable knowledge store (libsqlite3-dev): CMake's own FindSQLite3.
find_package(SQLite3 REQUIRED)
# libcrypto: HMAC-SHA256 for keyed semantic-cache snapshots.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# libcurl (libcurl4-openssl-dev): the remote encoders' HTTP/1.1 and HTTP/2 client.
find_package(CURL REQUIRED)
# simdjson (libsimdjson-dev): reads the remote engines' answers (batches of
# vectors, tens to hundreds of kilobytes of JSON) at gigabytes per second.
find_package(simdjson REQUIRED)
# hiredis ships a pkg-config file but no CMake config on Debian 12.
find_package(PkgConfig REQUIRED)
# Oniguruma (libonig-dev): the regular expressions of tokenizer.json's Split
# and Replace steps, in the engine Hugging Face's tokenizers library uses.
pkg_check_modules(ONIGURUMA REQUIRED IMPORTED_TARGET oniguruma)
set(RAPIDQA_REDIS_LIBRARIES)
if(RAPIDQA_WITH_REDIS)
  pkg_check_modules(HIREDIS IMPORTED_TARGET hiredis)
  if(NOT HIREDIS_FOUND)
    message(FATAL_ERROR "RAPIDQA_WITH_REDIS needs hiredis (libhiredis-dev), which was not found. Install it, or "
                        "configure with -DRAPIDQA_WITH_REDIS=OFF (engines then refuse redis options).")
  endif()
  set(RAPIDQA_REDIS_LIBRARIES PkgConfig::HIREDIS)
endif()
# libpq (libpq-dev) for PostgreSQL knowledge stores, through its pkg-config file.
set(RAPIDQA_POSTGRES_LIBRARIES)
if(RAPIDQA_WITH_POSTGRES)
  pkg_check_modules(LIBPQ IMPORTED_TARGET libpq)
  if(NOT LIBPQ_FOUND)
    message(FATAL_ERROR "RAPIDQA_WITH_POSTGRES needs libpq (libpq-dev), which was not found. Install it, or "
                        "configure with -DRAPIDQA_WITH_POSTGRES=OFF (postgresql:// stores are then refused).")
  endif()
  set(RAPIDQA_POSTGRES_LIBRARIES PkgConfig::LIBPQ)
endif()
# libwebsockets (libwebsockets-dev) for rapidqa-server: HTTP/1.1 and
# WebSocket on one event loop, TLS through OpenSSL; nghttp2 (libnghttp2-dev)
# speaks HTTP/2 on raw sockets of that loop.
if(RAPIDQA_WITH_SERVER AND RAPIDQA_BUILD_EXAMPLES)
  pkg_check_modules(LIBWEBSOCKETS IMPORTED_TARGET libwebsockets)
  pkg_check_modules(LIBNGHTTP2 IMPORTED_TARGET libnghttp2)
  find_package(OpenSSL REQUIRED COMPONENTS SSL Crypto)  # the HTTP/2 port's own TLS
  if(NOT LIBWEBSOCKETS_FOUND OR NOT LIBNGHTTP2_FOUND)
    message(FATAL_ERROR "RAPIDQA_WITH_SERVER needs libwebsockets and nghttp2 (libwebsockets-dev, libnghttp2-dev), "
                        "which were not both found. Install them, or configure with -DRAPIDQA_WITH_SERVER=OFF.")
  endif()
endif()
# gRPC C++ and protobuf (libgrpc++-dev, protobuf-compiler-grpc) for
# rapidqa-server's gRPC services, and for RemoteEncoder's KServe v2 over
# gRPC (without them the core refuses that protocol).
find_package(Protobuf QUIET)
find_package(gRPC CONFIG QUIET)
set(RAPIDQA_GRPC_CLIENT_SOURCES src/remote/grpc_absent.cpp)
set(RAPIDQA_GRPC_CLIENT_LIBRARIES)
if(Protobuf_FOUND AND gRPC_FOUND)
  set(RAPIDQA_GRPC_CLIENT_SOURCES src/remote/grpc_lane.cpp src/remote/kserve_grpc_wire.cpp)
  set(RAPIDQA_GRPC_CLIENT_LIBRARIES gRPC::grpc++ protobuf::libprotobuf)
endif()
if(RAPIDQA_WITH_SERVER AND RAPIDQA_BUILD_EXAMPLES)
  find_program(RAPIDQA_GRPC_CPP_PLUGIN grpc_cpp_plugin)
  if(NOT Protobuf_FOUND OR NOT gRPC_FOUND OR NOT RAPIDQA_GRPC_CPP_PLUGIN)
    message(FATAL_ERROR "RAPIDQA_WITH_SERVER needs gRPC C++ and protoc (libgrpc++-dev, protobuf-compiler, "
                        "protobuf-compiler-grpc), which were not all found. Install them, or configure with "
                        "-DRAPIDQA_WITH_SERVER=OFF (no rapidqa-server).")
  endif()
endif()

# TorchConfig puts its own flags into TORCH_CXX_FLAGS (the C++11 ABI switch);
# they must reach every translation unit that includes LibTorch.
separate_arguments(RAPIDQA_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")

set(RAPIDQA_CORE_DEPS
  faiss fmt::fmt nlohmann_json::nlohmann_json utf8proc::utf8proc PkgConfig::ONIGURUMA ${RAPIDQA_REDIS_LIBRARIES}
  ${RAPIDQA_POSTGRES_LIBRARIES} OpenSSL::Crypto
  SQLite::SQLite3 CURL::libcurl simdjson::simdjson ${RAPIDQA_GRPC_CLIENT_LIBRARIES} OpenMP::OpenMP_CXX ${BLAS_LIBRARIES}
  Threads::Threads)
set(RAPIDQA_MODEL_DEPS)
if(RAPIDQA_WITH_MODELS)
  set(RAPIDQA_MODEL_DEPS ${TORCH_LIBRARIES} DNNL::dnnl fmt::fmt ${BLAS_LIBRARIES} Threads::Threads)
endif()

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()
