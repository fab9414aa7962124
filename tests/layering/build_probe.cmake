# Builds one layering probe. EXPECT is "compiles", or the header whose
# include must fail the build as not found (in GCC's or clang's words).
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(EXPECT STREQUAL "compiles")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TARGET} should compile (it includes only allowed layers), but:\n${out}")
  endif()
  message(STATUS "${TARGET} compiles")
else()
  if(rc EQUAL 0)
    message(FATAL_ERROR "${TARGET} compiled: an include of ${EXPECT} from a lower layer was not refused")
  endif()
  # GCC: "X: No such file or directory"; clang: "'X' file not found".
  string(FIND "${out}" "${EXPECT}: No such file or directory" found_gcc)
  string(FIND "${out}" "'${EXPECT}' file not found" found_clang)
  if(found_gcc EQUAL -1 AND found_clang EQUAL -1)
    message(FATAL_ERROR "${TARGET} failed, but not because ${EXPECT} was not found:\n${out}")
  endif()
  message(STATUS "${TARGET} refused: ${EXPECT} is not visible from that layer")
endif()
