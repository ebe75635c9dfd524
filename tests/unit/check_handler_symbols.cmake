# check_handler_symbols.cmake - fails when the signal handler's object file (prof_sighandler.c)
# references any symbol from outside: code that runs in signal context must call nothing, not
# even libc (no sanitizer hooks, no __stack_chk_fail, no memcpy the compiler chose to emit), and
# reads no thread-local but its own initial-exec ones (no __tls_get_addr).
#   cmake -DNM=<nm> -DOBJECTS=<a|b|c> -P check_handler_symbols.cmake
string(REPLACE "|" ";" objects "${OBJECTS}")
set(found "")
foreach(o IN LISTS objects)
  if(o MATCHES "prof_sighandler\\.c\\.o$")
    set(found "${o}")
  endif()
endforeach()
if(NOT found)
  message(FATAL_ERROR "prof_sighandler.c.o not among ${OBJECTS}")
endif()
execute_process(COMMAND "${NM}" -u "${found}" OUTPUT_VARIABLE undefined RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -u ${found} failed (${rc})")
endif()
# The GOT's base, which the linker provides: the thread's JIT marks (initial-exec TLS) are read at
# the offset the GOT holds for them. Data, not code.
string(REGEX REPLACE "[ \t]*U _GLOBAL_OFFSET_TABLE_\n?" "" undefined "${undefined}")
string(STRIP "${undefined}" undefined)
if(undefined)
  message(FATAL_ERROR "the signal handler references external symbols:\n${undefined}")
endif()
message(STATUS "1 passed, 0 failed: prof_sighandler.c.o references no external symbol")
