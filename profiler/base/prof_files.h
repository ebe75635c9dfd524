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
 * A directory the user names (CLRSCOPE_DUMP_DIR, the export directory) is held to a rule of its
 * own (prof_files_dir_open): others must not be able to replace what clrscope writes there, so
 * it is refused when it is a symbolic link, belongs to another user than this one or root, or
 * can be written by other users without being sticky. Files in it are made and read relative to
 * a descriptor of the directory (openat), so renaming a parent directory cannot redirect them.
 *
 * ctx: any clrscope thread (file system calls only); not in signal handlers or CLR callbacks.
 */
#ifndef PROF_FILES_H
#define PROF_FILES_H

#include <sys/stat.h>
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

/* Creates `path` and its missing parents (mode 0700) and opens the directory itself, never
 * through a link (O_DIRECTORY | O_NOFOLLOW, close-on-exec), when it is fit to hold clrscope's
 * files: a real directory, owned by this user (effective uid) or root, and writable by no other
 * user (group or others) unless it is sticky (as /tmp is: there only a file's owner can remove
 * or rename it). With `private_dir` (clrscope's own default directories) it must be this user's
 * and is closed to 0700 when others had any access. Fills *st (when not NULL) with the
 * directory's status. Returns the descriptor, or -1 with errno set (ELOOP: a link; ENOTDIR: no
 * directory; EPERM: another user's, or open to others) and the reason in words in `why`. */
int prof_files_dir_open(const char *path, int private_dir, struct stat *st, char *why,
                        size_t whycap);

/* The rule above for a directory's status `st`, checked without changing anything (for a
 * directory opened earlier and used again): 0, or -1 with errno EPERM and the reason in `why`. */
int prof_files_dir_fit(const struct stat *st, int private_dir, char *why, size_t whycap);

/* Whether a directory that prof_files_dir_open accepted is shared with other users: writable by
 * them (then sticky). Files of other processes there are not this process's to remove. */
int prof_files_dir_shared(const struct stat *st);

/* Opens a new file for writing: created by this call (O_CREAT | O_EXCL), never through a link,
 * close-on-exec. A file already there of that name is first removed (a leftover of a process
 * that died mid-write; in a sticky directory only our own can be), so the call fails only when
 * the name cannot be had. Returns the descriptor, or -1 with errno. */
int prof_files_create(const char *path, mode_t mode);
/* The same for `name` in the directory open as `dirfd` (AT_FDCWD: the working directory). */
int prof_files_create_at(int dirfd, const char *name, mode_t mode);

#endif
