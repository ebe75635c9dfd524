/*
 * prof_arch.h - what the signal handler needs to know of the CPU: the interrupted context's
 * registers, a system call without libc, the thread pointer, and what a system call cut short
 * looks like. x86-64 and arm64 (AArch64). Everything here may run in signal context: inline, no
 * calls, no errno.
 *
 * Both keep a frame record of two words where the frame pointer points (rbp / x29): the caller's
 * frame pointer, then the return address, so the frame-pointer walk is the same on both. On
 * arm64 a function that calls nothing may keep its return address in the link register (x30)
 * and make no record: prof_arch_lr gives it to the walk (prof_sighandler.c), which puts that
 * caller in where it can tell it apart from the function's own return addresses. x86-64's
 * return address is on the stack: prof_arch_lr is 0 there.
 */
#ifndef PROF_ARCH_H
#define PROF_ARCH_H

#include <stdint.h>
#include <ucontext.h>

#if defined(__x86_64__)

static inline uintptr_t prof_arch_pc(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}
static inline uintptr_t prof_arch_sp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
}
static inline uintptr_t prof_arch_fp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
}
/* the register a system call returns its result in */
static inline long prof_arch_ret(const ucontext_t *uc)
{
    return (long)uc->uc_mcontext.gregs[REG_RAX];
}

/* A system call without libc (and without errno). */
static inline long prof_arch_syscall3(long n, long a, long b, long c)
{
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return ret;
}

/* The thread pointer: glibc's tcbhead_t.tcb points to itself, at the top of the thread's stack
 * mapping (struct pthread is there). */
static inline uintptr_t prof_arch_thread_pointer(void)
{
    uintptr_t tp;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
    return tp;
}

static inline uintptr_t prof_arch_stack_pointer(void)
{
    uintptr_t sp;
    __asm__ volatile("mov %%rsp, %0" : "=r"(sp));
    return sp;
}

static inline uintptr_t prof_arch_lr(const ucontext_t *uc)
{
    (void)uc;
    return 0;
}

/* The system call instruction (syscall: 0f 05) and its length. */
#define PROF_ARCH_SYSCALL_LEN 2
static inline int prof_arch_is_syscall(const volatile uint8_t *p)
{
    return p[0] == 0x0f && p[1] == 0x05;
}

#elif defined(__aarch64__)

static inline uintptr_t prof_arch_pc(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.pc;
}
static inline uintptr_t prof_arch_sp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.sp;
}
static inline uintptr_t prof_arch_fp(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.regs[29];
}
static inline long prof_arch_ret(const ucontext_t *uc)
{
    return (long)uc->uc_mcontext.regs[0];
}
static inline uintptr_t prof_arch_lr(const ucontext_t *uc)
{
    return (uintptr_t)uc->uc_mcontext.regs[30];
}

static inline long prof_arch_syscall3(long n, long a, long b, long c)
{
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
}

/* glibc on arm64 (TLS variant I): the thread pointer points just past struct pthread, which
 * sits at the top of the thread's stack mapping, above the stack. */
static inline uintptr_t prof_arch_thread_pointer(void)
{
    uintptr_t tp;
    __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
    return tp;
}

static inline uintptr_t prof_arch_stack_pointer(void)
{
    uintptr_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    return sp;
}

/* svc #0: d4000001, little-endian */
#define PROF_ARCH_SYSCALL_LEN 4
static inline int prof_arch_is_syscall(const volatile uint8_t *p)
{
    return p[0] == 0x01 && p[1] == 0x00 && p[2] == 0x00 && p[3] == 0xd4;
}

#else
#error "clrscope's signal handler knows x86-64 and arm64 only"
#endif

#endif
