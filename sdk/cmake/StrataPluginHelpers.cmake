# strata_add_plugin(<target> SOURCES ...): a MODULE library with hidden visibility that exports only
# strata_plugin_entry, placed where the runtime looks for plugins.
function(strata_add_plugin target)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "SOURCES" ${ARGN})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_property(GLOBAL APPEND PROPERTY STRATA_PLUGIN_TARGETS ${target}) # every plugin of this build, by target name
  target_link_libraries(${target} PRIVATE strata::sdk)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(NOT ARG_OUTPUT_DIR)
    if(DEFINED STRATA_PLUGIN_OUTPUT_DIR)
      set(ARG_OUTPUT_DIR ${STRATA_PLUGIN_OUTPUT_DIR})
    else()
      set(ARG_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
    endif()
  endif()
  set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
endfunction()
