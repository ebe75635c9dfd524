# build.cmake - what every build of libclrscope.so shares (included by the top CMakeLists.txt):
#
# - clrscope_build: an interface target giving CLRSCOPE_VERSION (project()'s version) and
#   clrscope_commit.h (CLRSCOPE_COMMIT, from git at each build: commit.cmake) to the code that
#   reports them (api/api_status.c, tools/launcher_run.c);
# - clrscope_library(NAME DIR LINK...): the profiler library NAME (libclrscope.so in DIR) from
#   the composition root (clrscope_entry) and LINK, with the exports of profiler/exports.map and
#   clrscope_glibc_min(), the oldest glibc it loads on. That is read from the imports of a first
#   link of the same objects (NAME_probe; glibc_min.cmake) and compiled into the second, so
#   /api/v1/status states it for the very file it runs from.
set(CLRSCOPE_GENERATED ${PROJECT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${CLRSCOPE_GENERATED})
add_custom_target(clrscope_commit ALL
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUT=${CLRSCOPE_GENERATED}/clrscope_commit.h
          -P ${CMAKE_CURRENT_LIST_DIR}/commit.cmake
  BYPRODUCTS ${CLRSCOPE_GENERATED}/clrscope_commit.h
  COMMENT "Reading the commit"
  VERBATIM)
add_library(clrscope_build INTERFACE)
target_include_directories(clrscope_build INTERFACE ${CLRSCOPE_GENERATED})
target_compile_definitions(clrscope_build INTERFACE CLRSCOPE_VERSION="${PROJECT_VERSION}")
add_dependencies(clrscope_build clrscope_commit)

set(CLRSCOPE_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})

function(clrscope_library name dir)
  set(links ${ARGN})
  set(glibc_c ${CLRSCOPE_GENERATED}/${name}_glibc_min.c)
  foreach(t ${name}_probe ${name})
    if(t STREQUAL name)
      add_library(${t} SHARED $<TARGET_OBJECTS:clrscope_entry> ${glibc_c})
      set_target_properties(${t} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${dir})
    else()
      add_library(${t} SHARED EXCLUDE_FROM_ALL $<TARGET_OBJECTS:clrscope_entry>
        ${CLRSCOPE_PACKAGING_DIR}/glibc_probe.c)
      set_target_properties(${t} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CLRSCOPE_GENERATED}/${t})
    endif()
    target_link_libraries(${t} PRIVATE ${links})
    target_link_options(${t} PRIVATE
      LINKER:--version-script=${PROJECT_SOURCE_DIR}/profiler/exports.map
      LINKER:-z,defs LINKER:-z,noexecstack)
    set_target_properties(${t} PROPERTIES
      LINK_DEPENDS ${PROJECT_SOURCE_DIR}/profiler/exports.map
      OUTPUT_NAME clrscope)
  endforeach()
  add_custom_command(OUTPUT ${glibc_c}
    COMMAND ${CMAKE_COMMAND} -DOBJDUMP=${CMAKE_OBJDUMP} -DLIB=$<TARGET_FILE:${name}_probe>
            -DOUT=${glibc_c} -P ${CLRSCOPE_PACKAGING_DIR}/glibc_min.cmake
    DEPENDS ${name}_probe ${CLRSCOPE_PACKAGING_DIR}/glibc_min.cmake
    COMMENT "Reading the glibc ${name} needs"
    VERBATIM)
endfunction()
