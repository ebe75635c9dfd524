# check_exports.cmake - fails unless LIB exports DllGetClassObject and clrscope_serve and nothing
# else (the runtime needs the first, `clrscope serve` the second; any other would be bound by the
# app's own code or another library of the same names: profiler/exports.map). With -DONLY_GLIBC=ON (the shipped library), also unless every
# library it needs is one of glibc's (libc, libm, libdl, libpthread) or the loader.
#   cmake -DNM=<nm> -DREADELF=<readelf> -DLIB=<libclrscope.so> [-DONLY_GLIBC=ON] -P check_exports.cmake
execute_process(COMMAND "${NM}" -D --defined-only "${LIB}" OUTPUT_VARIABLE defined
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIB} failed (${rc})")
endif()
string(REGEX MATCHALL "[^ \n]+\n" lines "${defined}")
set(names "")
foreach(line IN LISTS lines)
  string(STRIP "${line}" name)
  list(APPEND names ${name})
endforeach()
if(NOT names STREQUAL "DllGetClassObject;clrscope_serve")
  message(FATAL_ERROR "${LIB} exports ${names}; it must export DllGetClassObject and "
    "clrscope_serve alone")
endif()
set(what "exports DllGetClassObject and clrscope_serve alone")
if(ONLY_GLIBC)
  execute_process(COMMAND "${READELF}" -d "${LIB}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${READELF} -d ${LIB} failed (${rc})")
  endif()
  string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dyn}")
  if(NOT needed)
    message(FATAL_ERROR "${READELF} -d ${LIB} lists no needed library:\n${dyn}")
  endif()
  foreach(n IN LISTS needed)
    string(REGEX REPLACE "Shared library: \\[(.*)\\]" "\\1" n "${n}")
    if(NOT n MATCHES "^(libc\\.so\\.6|libm\\.so\\.6|libdl\\.so\\.2|libpthread\\.so\\.0|ld-linux-x86-64\\.so\\.2)$")
      message(FATAL_ERROR "${LIB} needs ${n}: the shipped library may need glibc alone")
    endif()
  endforeach()
  set(what "${what} and needs glibc alone")
endif()
message(STATUS "1 passed, 0 failed: ${LIB} ${what}")
