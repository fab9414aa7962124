# Runs SCRIPT under NODE to write OUTPUT, then fails unless OUTPUT equals
# EXPECTED (a generated file kept in the source tree).
execute_process(COMMAND ${NODE} ${SCRIPT} ${OUTPUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SCRIPT} failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUTPUT} ${EXPECTED} RESULT_VARIABLE differs)
if(differs)
  message(FATAL_ERROR "${EXPECTED} is out of date: regenerate it with node ${SCRIPT} ${EXPECTED}")
endif()
