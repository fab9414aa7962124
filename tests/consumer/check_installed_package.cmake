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
run_step(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
         -DCMAKE_BUILD_TYPE=Release)
run_step(${CMAKE_COMMAND} --build ${WORK_DIR}/build -j 2)
run_step(${WORK_DIR}/build/consumer_cpp ${FAQ})
run_step(${WORK_DIR}/build/consumer_c ${FAQ})

# Every installed program answers --help with exit code 0 and its usage on
# stdout, and refuses an unknown option with exit code 2 (as
# tests/cli/every_tool_usage.sh checks in the build tree). The installed
# programs carry no RPATH to ${prefix}/lib, so the library is found through
# LD_LIBRARY_PATH here.
file(GLOB installed_programs ${prefix}/bin/*)
if(NOT installed_programs)
  message(FATAL_ERROR "no programs were installed under ${prefix}/bin")
endif()
foreach(program IN LISTS installed_programs)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/lib ${program} --help
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "usage")
    message(FATAL_ERROR "${program} --help: exit code ${rc} (wanted 0 and the usage on stdout)\n${out}${err}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${prefix}/lib ${program} --no-such-option
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "no-such-option")
    message(FATAL_ERROR "${program} --no-such-option: exit code ${rc} (wanted 2 and a message on stderr)\n${out}${err}")
  endif()
  message(STATUS "${program}: --help and an unknown option answered")
endforeach()
