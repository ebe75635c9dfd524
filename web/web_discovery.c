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

/* /tmp/clrscope, shared by every user like /tmp itself: a real directory (not a link), sticky
 * when it is not ours, so that each user's files stay their own. 0, or -1 after a log line. */
static int shared_dir(const char *dir)
{
    struct stat st;
    if (!mkdir(dir, 01777)) {
        chmod(dir, 01777); /* past the umask; in sticky /tmp no one else can swap it meanwhile */
    } else if (errno != EEXIST) {
        prof_log(LOG_WARN, "cannot create %s (%s); `clrscope ls` will not list this process",
                 dir, strerror(errno));
        return -1;
    }
    if (lstat(dir, &st) || !S_ISDIR(st.st_mode) ||
        (st.st_uid != geteuid() && !(st.st_mode & S_ISVTX))) {
        prof_log(LOG_WARN, "%s is not a directory shared the way /tmp is (a link, a file, or "
                 "another user's without the sticky bit); `clrscope ls` will not list this "
                 "process", dir);
        return -1;
    }
    return 0;
}

void web_discovery_write(const char *host, int port)
{
    const char *rt = prof_runtime_dir();
    char dir[400];
    snprintf(dir, sizeof dir, "%s/clrscope", rt ? rt : "/tmp");
    if (rt ? prof_files_private_dir(dir) : shared_dir(dir)) {
        if (rt)
            prof_log(LOG_WARN, "cannot use %s (%s); `clrscope ls` will not list this process",
                     dir, strerror(errno));
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
