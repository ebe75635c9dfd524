/* web_discovery.c - see web_discovery.h. */
#include "web_discovery.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_files.h"
#include "prof_log.h"

/* Written by web_discovery_write (Initialize's thread), cleared by web_discovery_remove at exit
 * or at Shutdown. */
static struct discovery_state {
    char path[600]; /* the discovery file written, "" when none */
} discovery;

/* Why `dir` was refused (prof_files_private_dir failed with `err`), in a few words. */
static void refusal(const char *dir, int err, char *why, size_t cap)
{
    struct stat st;
    if (lstat(dir, &st))
        snprintf(why, cap, "%s", strerror(err));
    else if (S_ISLNK(st.st_mode))
        snprintf(why, cap, "it is a symbolic link");
    else if (!S_ISDIR(st.st_mode))
        snprintf(why, cap, "it is not a directory");
    else if (err == EPERM)
        snprintf(why, cap, "it belongs to another user (uid %u)", (unsigned)st.st_uid);
    else
        snprintf(why, cap, "%s", strerror(err));
}

void web_discovery_write(const char *host, int port)
{
    /* the user's own directory: $XDG_RUNTIME_DIR/clrscope, else /tmp/clrscope-EUID (the uid
     * the file is written as, which `clrscope ls` checks it against); in /tmp another user may
     * have taken the name first, so it must be a real directory of ours (prof_files.h) */
    const char *rt = prof_runtime_dir();
    char dir[400];
    if (rt)
        snprintf(dir, sizeof dir, "%s/clrscope", rt);
    else
        snprintf(dir, sizeof dir, "/tmp/clrscope-%u", (unsigned)geteuid());
    if (prof_files_private_dir(dir)) {
        char why[96];
        refusal(dir, errno, why, sizeof why);
        prof_log(LOG_WARN, "cannot use %s for the discovery file: %s; `clrscope ls` will not "
                 "list this process", dir, why);
        return;
    }
    snprintf(discovery.path, sizeof discovery.path, "%s/%d.json", dir, (int)g_core.pid);
    char tmp[620];
    snprintf(tmp, sizeof tmp, "%s.tmp", discovery.path);
    int fd = prof_files_create(tmp, 0600);
    if (fd < 0) {
        prof_log(LOG_WARN, "cannot write %s (%s); `clrscope ls` will not list this process", tmp,
                 strerror(errno));
        discovery.path[0] = 0;
        return;
    }
    char url[200];
    snprintf(url, sizeof url, "http://%s:%d/", host, port);
    /* names are escaped for JSON by keeping only printable ASCII without quotes/backslashes */
    char cmd[sizeof g_core.cmdline];
    size_t j = 0;
    for (size_t i = 0; g_core.cmdline[i] && j + 1 < sizeof cmd; i++) {
        char ch = g_core.cmdline[i];
        cmd[j++] = (ch < 32 || ch == '"' || ch == '\\' || ch > 126) ? '?' : ch;
    }
    cmd[j] = 0;
    /* the pid namespace the pid belongs to: `clrscope ls` run in another one (a container that
     * shares the directory) must not take this process for gone */
    char ns[64] = "";
    ssize_t nl = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[nl > 0 ? nl : 0] = 0;
    for (char *q = ns; *q; q++)
        if (*q < 32 || *q == '"' || *q == '\\' || *q > 126)
            *q = '?';
    char body[1500];
    int n = snprintf(body, sizeof body,
                     "{\"pid\":%d,\"port\":%d,\"url\":\"%s\",\"bind\":\"%s\",\"token\":%s%s%s,"
                     "\"cmdline\":\"%s\",\"runtime\":\"%s\",\"started\":%.3f,\"pid_ns\":\"%s\"}\n",
                     (int)g_core.pid, port, url, g_cfg.bind, g_cfg.token[0] ? "\"" : "",
                     g_cfg.token[0] ? g_cfg.token : "null", g_cfg.token[0] ? "\"" : "", cmd,
                     g_core.runtime_version, g_core.start_unix, ns);
    if (n < 0 || (size_t)n >= sizeof body)
        n = 0; /* cannot happen with the fields' sizes; an empty file then fails below */
    ssize_t w = n ? write(fd, body, (size_t)n) : -1;
    close(fd);
    if (w != n || rename(tmp, discovery.path)) {
        unlink(tmp);
        discovery.path[0] = 0;
    }
}

void web_discovery_remove(void)
{
    if (discovery.path[0]) {
        unlink(discovery.path);
        discovery.path[0] = 0;
    }
}
