# rapidqa_layer(): one layer of the library as its own object library.
#
# The layers and the arrows between them are in the top CMakeLists.txt and
# in the README's architecture section. A layer compiles with exactly two
# kinds of include roots: its own, and those of the layers it may use (they
# come through target_link_libraries, so the allowed arrows are the link
# dependencies). Each root is a directory in the build tree holding links to
# the layer's source folders (so "index/int8_rows.h" resolves) and to the
# public headers the layer owns (so "rapidqa/semantic_cache.h" resolves).
# An include of a header from a layer above is therefore "No such file" at
# compile time; tests/layering checks that it is.
#
#   rapidqa_layer(<name>
#     FOLDERS <src/ folders>            source folders the layer owns
#     SOURCES <files>                   its .cpp files
#     PUBLIC_HEADERS <include/rapidqa/ files, or paths>  public headers it owns
#     LAYERS <layers>                   layers it may use
#     LIBRARIES <targets>               third-party targets whose headers it uses
#     EXPORT_INTERNALS)                 other shared libraries link its internals
#
# EXPORT_INTERNALS: the layer's symbols keep default visibility, because a
# library above it that is built as its own shared object (rapidqa::models,
# rapidqa::tools) calls its internal classes. Internal headers are never
# installed, so this widens no supported API.

function(rapidqa_layer name)
  cmake_parse_arguments(L "EXPORT_INTERNALS" "" "FOLDERS;SOURCES;PUBLIC_HEADERS;LAYERS;LIBRARIES" ${ARGN})
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/rapidqa)
  foreach(folder IN LISTS L_FOLDERS)
    get_filename_component(folder_name ${folder} NAME)
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${folder_name} SYMBOLIC)
  endforeach()
  foreach(header IN LISTS L_PUBLIC_HEADERS)
    if(IS_ABSOLUTE ${header})
      set(target_path ${header})
    else()
      set(target_path ${PROJECT_SOURCE_DIR}/include/rapidqa/${header})
    endif()
    if(IS_ABSOLUTE ${header})
      get_filename_component(header_name ${header} NAME)
    else()
      set(header_name ${header})  # keeps a subfolder: detail/batch_plan.h
    endif()
    get_filename_component(header_dir ${root}/rapidqa/${header_name} DIRECTORY)
    file(MAKE_DIRECTORY ${header_dir})
    file(CREATE_LINK ${target_path} ${root}/rapidqa/${header_name} SYMBOLIC)
    set_property(GLOBAL APPEND PROPERTY RAPIDQA_LAYERED_HEADERS ${header_name})
  endforeach()

  add_library(rapidqa_layer_${name} OBJECT ${L_SOURCES})
  target_include_directories(rapidqa_layer_${name} PUBLIC $<BUILD_INTERFACE:${root}>)
  foreach(layer IN LISTS L_LAYERS)
    target_link_libraries(rapidqa_layer_${name} PUBLIC rapidqa_layer_${layer})
  endforeach()
  target_link_libraries(rapidqa_layer_${name} PUBLIC ${L_LIBRARIES})
  target_compile_definitions(rapidqa_layer_${name} PRIVATE RAPIDQA_BUILDING_LIBRARY)
  target_compile_options(rapidqa_layer_${name} PRIVATE -Wall -Wextra -Wpedantic)
  if(L_EXPORT_INTERNALS)
    set_target_properties(rapidqa_layer_${name} PROPERTIES CXX_VISIBILITY_PRESET default VISIBILITY_INLINES_HIDDEN OFF)
  endif()
endfunction()

# The objects of the given layers, for add_library(... <result>).
function(rapidqa_layer_objects out)
  set(objects)
  foreach(layer IN LISTS ARGN)
    list(APPEND objects $<TARGET_OBJECTS:rapidqa_layer_${layer}>)
  endforeach()
  set(${out} ${objects} PARENT_SCOPE)
endfunction()

# A public header no layer owns would be visible to none: say so at
# configure time rather than as a "No such file" deep in the build. The
# arguments are headers of components this build leaves out.
function(rapidqa_check_every_public_header_has_a_layer)
  get_property(owned GLOBAL PROPERTY RAPIDQA_LAYERED_HEADERS)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR}/include/rapidqa ${PROJECT_SOURCE_DIR}/include/rapidqa/*.h)
  foreach(header IN LISTS headers)
    if(NOT header IN_LIST owned AND NOT header IN_LIST ARGN)
      message(FATAL_ERROR "include/rapidqa/${header} belongs to no layer: add it to the PUBLIC_HEADERS of the "
                          "rapidqa_layer() that implements it (top CMakeLists.txt)")
    endif()
  endforeach()
endfunction()
