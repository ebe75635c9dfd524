# check_tls_static.cmake - fails when libclrscope.so imports __tls_get_addr: the library is
# dlopen'ed by the runtime, and a thread-local variable of the general-dynamic model costs each
# thread a malloc on its first access, inside a runtime callback. Thread-locals are PROF_TLS
# (initial-exec; prof_core.h).
#   cmake -DNM=<nm> -DLIB=<libclrscope.so> -P check_tls_static.cmake
execute_process(COMMAND "${NM}" -D --undefined-only "${LIB}" OUTPUT_VARIABLE undefined
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIB} failed (${rc})")
endif()
if(undefined MATCHES "__tls_get_addr")
  message(FATAL_ERROR "${LIB} imports __tls_get_addr: a thread-local that is not PROF_TLS")
endif()
if(NOT undefined MATCHES "pthread_create|malloc")
  message(FATAL_ERROR "${NM} -D ${LIB} listed no imports at all:\n${undefined}")
endif()
message(STATUS "1 passed, 0 failed: ${LIB} uses static TLS only")
