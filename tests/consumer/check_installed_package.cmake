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
