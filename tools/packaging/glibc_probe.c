/* glibc_probe.c - clrscope_glibc_min() of a library's probe link (tools/packaging/build.cmake):
 * the link whose imports say which glibc the library needs, before that is known. */
const char *clrscope_glibc_min(void);
const char *clrscope_glibc_min(void)
{
    return "unknown";
}
