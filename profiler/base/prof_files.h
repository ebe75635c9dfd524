/*
 * prof_files - creating clrscope's files in directories other users can write to.
 *
 * By default heap snapshots go to /tmp/clrscope-dumps-UID, discovery files to /tmp/clrscope-EUID
 * (both under $XDG_RUNTIME_DIR when that is set). In /tmp another user can create those names
 * first: a directory of theirs that our snapshots would land in (readable by them: the app's
 * whole heap), or a symbolic link or file where we would write (truncating a file of ours, or
 * handing them a token). So a private directory is used only when it is a real directory of
 * this user's, readable by no one else, and every file is created new (O_EXCL, never through a
 * link); a name someone else holds makes that one feature fail with a reason.
 *
 * ctx: any clrscope thread (file system calls only); not in signal handlers or CLR callbacks.
 */
#ifndef PROF_FILES_H
#define PROF_FILES_H

#include <sys/types.h>

/* $XDG_RUNTIME_DIR when it is usable: an absolute path of at most 300 bytes (the spec says a
 * relative one is to be ignored) to an existing directory (its owner, the login manager, makes
 * it; clrscope does not); NULL otherwise. */
const char *prof_runtime_dir(void);

/* Creates `path` and its missing parents with `mode` (mkdir -p). 0, or -1 with errno. */
int prof_files_mkdirs(const char *path, mode_t mode);

/* Creates `path` and its missing parents (mode 0700), then checks the directory itself: a real
 * directory, not a link, owned by this user (effective uid), and made 0700 when others had any
 * access. 0, or -1 with errno (EPERM: another user's; ELOOP or ENOTDIR: a link or a file). */
int prof_files_private_dir(const char *path);

/* Opens a new file for writing: created by this call (O_CREAT | O_EXCL), never through a link,
 * close-on-exec. A file already there of that name is first removed (a leftover of a process
 * that died mid-write; in a sticky directory only our own can be), so the call fails only when
 * the name cannot be had. Returns the descriptor, or -1 with errno. */
int prof_files_create(const char *path, mode_t mode);

#endif
