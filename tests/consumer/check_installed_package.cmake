# Installs the built library into a scratch prefix, configures and builds the
# consumer project against it with find_package(rapidqa), and runs both
# consumers. Run with cmake -P; see tests/CMakeLists.txt for the variables.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${err}")
  endif()
endfunction()

run_step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/include/rapidqa/rapidqa.h OR NOT EXISTS ${prefix}/include/rapidqa/qa_engine.h)
  message(FATAL_ERROR "headers were not installed under ${prefix}/include/rapidqa")
endif()
# The core library must not need LibTorch or oneDNN, whatever else was built.
file(GLOB core_library ${prefix}/lib*/librapidqa_core.so)
if(NOT core_library)
  message(FATAL_ERROR "librapidqa_core.so was not installed under ${prefix}")
endif()
execute_process(COMMAND readelf -d ${core_library} OUTPUT_VARIABLE needed RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${core_library} failed")
endif()
if(needed MATCHES "libtorch|libc10|libdnnl")
  message(FATAL_ERROR "librapidqa_core.so depends on LibTorch or oneDNN:\n${needed}")
endif()
# The build's compilers (when given): a sanitizer build's runtime is theirs.
set(compilers)
if(C_COMPILER AND CXX_COMPILER)
  set(compilers -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
run_step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
         -DCMAKE_BUILD_TYPE=Release ${compilers})
run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j 2)
run_step(${WORK_DIR}/build/consumer_cpp ${FAQ})
run_step(${WORK_DIR}/build/consumer_c ${FAQ})

# A C user with pkg-config and no CMake, compiling with the build's C
# compiler (a sanitizer build's runtime is that compiler's).
get_filename_component(lib_dir ${core_library} DIRECTORY)
set(pc_dir ${lib_dir}/pkgconfig)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
execute_process(COMMAND pkg-config --cflags --libs rapidqa RESULT_VARIABLE rc OUTPUT_VARIABLE flags
                ERROR_VARIABLE err OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs rapidqa failed: ${err}")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
if(NOT C_COMPILER)
  set(C_COMPILER cc)
endif()
run_step(${C_COMPILER} -std=c11 ${CONSUMER_SOURCE}/consumer.c ${flags} -Wl,-rpath,${lib_dir} -o ${WORK_DIR}/consumer_pkgconfig)
run_step(${WORK_DIR}/consumer_pkgconfig ${FAQ})

# Every installed program answers --help with exit code 0 and its usage on
# stdout, and refuses an unknown option with exit code 2 (as
# tests/cli/every_tool_usage.sh checks in the build tree), finding the
# libraries through their RUNPATH ($ORIGIN/../lib), nothing set around them.
file(GLOB installed_programs ${prefix}/bin/*)
if(NOT installed_programs)
  message(FATAL_ERROR "no programs were installed under ${prefix}/bin")
endif()
foreach(program IN LISTS installed_programs)
  execute_process(COMMAND ${program} --help
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "usage")
    message(FATAL_ERROR "${program} --help: exit code ${rc} (wanted 0 and the usage on stdout)\n${out}${err}")
  endif()
  execute_process(COMMAND ${program} --no-such-option
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "no-such-option")
    message(FATAL_ERROR "${program} --no-such-option: exit code ${rc} (wanted 2 and a message on stderr)\n${out}${err}")
  endif()
  message(STATUS "${program}: --help and an unknown option answered")
endforeach()
