/*
 * prof_config - clrscope's configuration, read once from the environment at Initialize.
 * Every bad value is logged once and replaced by its default; nothing here aborts.
 *
 * ctx: prof_config_load once, at Initialize, before any clrscope thread starts; after it g_cfg is
 * immutable and read from any thread. The prof_env_* helpers read the environment for a
 * module's own variables (at its start: not in a callback, they may log); prof_profile_name any
 * thread.
 */
#ifndef PROF_CONFIG_H
#define PROF_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum prof_profile_bit {
    PROFILE_CPU = 1 << 0,
    PROFILE_WALL = 1 << 1,
    PROFILE_ALLOC = 1 << 2,
    PROFILE_LIVE = 1 << 3,
    PROFILE_GC = 1 << 4,
    PROFILE_EXCEPTIONS = 1 << 5,
    PROFILE_LOCK = 1 << 6,
    PROFILE_HEAP = 1 << 7,
    PROFILE_ALL = 0xff,
};

struct prof_config {
    int dashboard;        /* CLRSCOPE_DASHBOARD (1) */
    int profile_sdk;      /* CLRSCOPE_PROFILE_SDK (0): the .NET SDK's own processes too */
    int port;             /* CLRSCOPE_PORT (6060; 0 = any) */
    char bind[64];        /* CLRSCOPE_BIND (127.0.0.1) */
    char token[256];      /* CLRSCOPE_TOKEN ("" = none; "auto" replaced by a random one) */
    int token_auto;       /* token was generated */
    int token_bad;        /* CLRSCOPE_TOKEN set but unusable: the dashboard stays off */
    int log_level;        /* CLRSCOPE_LOG_LEVEL */
    int sampling_hz;      /* CLRSCOPE_SAMPLING_HZ (100, 1..1000) */
    int history_s;        /* CLRSCOPE_HISTORY_S (900) */
    int max_frames;       /* CLRSCOPE_MAX_FRAMES (128) */
    int live_max;         /* CLRSCOPE_LIVE_MAX (4096) */
    int max_stack_nodes;  /* CLRSCOPE_MAX_STACK_NODES (200000) */
    size_t max_name_bytes; /* CLRSCOPE_MAX_NAME_BYTES (16 MiB) of the store's frame and label names */
    int max_threads;      /* CLRSCOPE_MAX_THREADS (4096) sampled per tick */
    double gc_warn;       /* CLRSCOPE_GC_WARN (0.30) */
    unsigned profiles;    /* CLRSCOPE_PROFILES (all) */
    char dump_dir[512];   /* CLRSCOPE_DUMP_DIR */
    int dump_dir_default; /* dump_dir is clrscope's default: it must be private (prof_files.h) */
    int dump_keep;        /* CLRSCOPE_DUMP_KEEP (5) */
    int64_t dump_max_heap;/* CLRSCOPE_DUMP_MAX_HEAP_MB (4096) in bytes */
    int dump_min_interval_s; /* CLRSCOPE_DUMP_MIN_INTERVAL_S (30; 0 = no limit) between starts */
    int exception_rate;   /* CLRSCOPE_EXCEPTION_SAMPLES_PER_S (100) */
    int lock_rate;        /* CLRSCOPE_LOCK_SAMPLES_PER_S (100) */
    int alloc_stack_rate; /* CLRSCOPE_ALLOC_STACKS_PER_S (200) allocation stack walks */
    double cpu_timer_budget; /* CLRSCOPE_CPU_TIMER_BUDGET (0.5 %) as a fraction of the app's CPU */
    double overhead_budget;  /* CLRSCOPE_OVERHEAD_BUDGET (1 %) as a fraction; 0 = no governor */
    double overhead_floor;   /* CLRSCOPE_OVERHEAD_FLOOR (1 %) of one core the budget allows */
};

extern struct prof_config g_cfg;

void prof_config_load(void);
/* Helpers shared by modules that read their own variables (the exporter reads DD_*). */
long prof_env_long(const char *name, long def, long min, long max);
double prof_env_double(const char *name, double def, double min, double max);
int prof_env_bool(const char *name, int def);
const char *prof_profile_name(unsigned bit);

#endif
