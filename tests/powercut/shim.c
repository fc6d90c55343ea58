/*
 * shim.c: LD_PRELOAD'ed into the power-cut test's writer (tests/powercut/README.md). It
 * records every change the process makes to the files of one directory, so that the parent can
 * rebuild what a disk would hold after a power cut at any point; and it cuts: at the Nth such
 * change it kills its own process with SIGKILL, before making it.
 *
 * Environment (without POWERCUT_DIR and POWERCUT_LOG the shim only passes calls through):
 *   POWERCUT_DIR      the directory whose files are modelled (the store's STORE.db, STORE.db-wal,
 *                     STORE.db-journal: every regular file there except *-shm, which is shared
 *                     memory that SQLite rebuilds after a crash and that the model treats as lost,
 *                     and *-watch, the library's watch ring: shared memory too, holding no state).
 *   POWERCUT_LOG      the file the records are appended to (outside POWERCUT_DIR).
 *   POWERCUT_KILL_AT  N >= 1: SIGKILL the process at the start of its Nth event (0: never).
 *   POWERCUT_KILL_NAME, POWERCUT_KILL_NAME_AT  NAME and M >= 1: also SIGKILL it at the start of
 *                     its Mth event on the file first seen under NAME (say the database file, whose
 *                     writes in WAL mode are checkpoints), whichever comes first.
 *   POWERCUT_SABOTAGE "drop-sync": do not record file syncs, as a disk that loses synced data
 *                     would (used only to show that the test can fail).
 *   POWERCUT_REAL_SYNC 1: also pass fsync/fdatasync on to the kernel (by default they return 0
 *                     at once: the durability the test checks is the model's, not the disk's).
 *
 * An event is a call that changes a modelled file or the directory: a write, a truncation or
 * extension, a file sync, a directory sync, the creation, removal or renaming of a file.
 * Records (little-endian, a 24-byte header {u32 type, u32 id, u64 off, u64 len} and then len
 * bytes) name files by ids the shim gives to inodes: a write goes to an inode, whatever its name
 * is at the time. The record of a write is appended after the write was made, the record of a
 * sync once the sync "completed" (before the call returns to the caller).
 *
 * Anything the model cannot follow on a modelled file (a shared writable mmap, a hole punch,
 * copy_file_range, a hard link, a rename across directories) is recorded as UNMODELLED, which
 * fails the cut: a new build of the library that starts doing such a thing is noticed rather
 * than tested wrongly.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* Record types: keep in step with powercut.py. */
enum {
    R_BASE = 1,        /* id names an inode that existed when the process started: payload name */
    R_CREATE = 2,      /* a new file: id, payload name (a directory entry, durable at a DIRSYNC) */
    R_WRITE = 3,       /* id, off, payload the bytes written */
    R_TRUNC = 4,       /* id, off = the new size */
    R_SYNC = 5,        /* id: fsync/fdatasync of the file */
    R_DIRSYNC = 6,     /* fsync of the directory */
    R_UNLINK = 7,      /* payload name */
    R_RENAME = 8,      /* payload "old\0new" */
    R_SYNCALL = 9,     /* sync()/syncfs(): every file and the directory */
    R_EXTEND = 10,     /* id, off = size: fallocate's growth (never shrinks) */
    R_UNMODELLED = 11, /* payload: what */
    R_CUT = 12,        /* off = the event number: the process is killed right after this record */
};

struct rec_hdr {
    uint32_t type, id;
    uint64_t off, len;
};

enum { FD_MAX = 65536, INODES_MAX = 256 };
enum { FD_NONE = 0, FD_FILE = 1, FD_DIR = 2 };

static struct {
    uint8_t kind;
    uint8_t append;
    uint32_t id;
} g_fds[FD_MAX];

static struct {
    dev_t dev;
    ino_t ino;
    uint32_t id;
    int used;
    char name[NAME_MAX + 1]; /* its name when the shim first saw it (for messages) */
} g_inodes[INODES_MAX];

static int g_active;
static dev_t g_dir_dev;
static ino_t g_dir_ino;
static int g_log = -1;
static unsigned long long g_kill_at, g_events, g_kill_name_at, g_name_events;
static char g_kill_name[NAME_MAX + 1];
static int g_drop_sync, g_real_sync;
static uint32_t g_next_id = 1;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* The real functions, from the next object in the lookup order (libc). */
static int (*real_openat)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_truncate)(const char *, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static void (*real_sync)(void);
static int (*real_syncfs)(int);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_close)(int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_fcntl)(int, int, ...);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_linkat)(int, const char *, int, const char *, int);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static ssize_t (*real_copy_file_range)(int, off_t *, int, off_t *, size_t, unsigned);
static ssize_t (*real_sendfile)(int, int, off_t *, size_t);

#define RESOLVE(name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name)

static void resolve_all(void) {
    RESOLVE(openat);
    RESOLVE(write);
    RESOLVE(pwrite);
    RESOLVE(writev);
    RESOLVE(pwritev);
    RESOLVE(pwritev2);
    RESOLVE(ftruncate);
    RESOLVE(truncate);
    RESOLVE(fsync);
    RESOLVE(fdatasync);
    RESOLVE(sync);
    RESOLVE(syncfs);
    RESOLVE(fallocate);
    RESOLVE(posix_fallocate);
    RESOLVE(close);
    RESOLVE(dup);
    RESOLVE(dup2);
    RESOLVE(dup3);
    RESOLVE(fcntl);
    RESOLVE(unlinkat);
    RESOLVE(renameat2);
    RESOLVE(renameat);
    RESOLVE(linkat);
    RESOLVE(mmap);
    RESOLVE(copy_file_range);
    RESOLVE(sendfile);
}

/* For a call that comes before the constructor ran (another preloaded object's constructor). */
#define ENSURE()                      \
    do {                              \
        if (!real_openat) resolve_all(); \
    } while (0)

static void die(const char *what) {
    char msg[256];
    int n = snprintf(msg, sizeof msg, "powercut shim: %s: %s\n", what, strerror(errno));
    if (n > 0) syscall(SYS_write, 2, msg, (size_t)n);
    _exit(97);
}

__attribute__((constructor)) static void shim_init(void) {
    resolve_all();
    const char *dir = getenv("POWERCUT_DIR"), *log = getenv("POWERCUT_LOG");
    if (!dir || !log || !*dir || !*log) return;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) die("POWERCUT_DIR");
    g_dir_dev = st.st_dev;
    g_dir_ino = st.st_ino;
    g_log = (int)syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (g_log < 0) die("POWERCUT_LOG");
    const char *k = getenv("POWERCUT_KILL_AT");
    g_kill_at = k ? strtoull(k, NULL, 10) : 0;
    const char *kn = getenv("POWERCUT_KILL_NAME"), *kna = getenv("POWERCUT_KILL_NAME_AT");
    if (kn && kna && strlen(kn) <= NAME_MAX) {
        strcpy(g_kill_name, kn);
        g_kill_name_at = strtoull(kna, NULL, 10);
    }
    const char *s = getenv("POWERCUT_SABOTAGE");
    g_drop_sync = s && strcmp(s, "drop-sync") == 0;
    const char *r = getenv("POWERCUT_REAL_SYNC");
    g_real_sync = r && strcmp(r, "1") == 0;
    g_active = 1;
}

/* Appends one record: header, then the payload pieces. Raw system calls: never re-enters. */
static void emit(uint32_t type, uint32_t id, uint64_t off, const struct iovec *parts, int nparts) {
    struct rec_hdr h = {type, id, off, 0};
    for (int i = 0; i < nparts; i++) h.len += parts[i].iov_len;
    struct iovec v[8];
    v[0].iov_base = &h;
    v[0].iov_len = sizeof h;
    for (int i = 0; i < nparts && i < 7; i++) v[i + 1] = parts[i];
    int cnt = 1 + (nparts < 7 ? nparts : 7);
    /* O_APPEND: one writev is one record unless it is short; then finish it piecewise. */
    size_t total = sizeof h + h.len, done = 0;
    while (done < total) {
        ssize_t n = syscall(SYS_writev, g_log, v, cnt);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("writing the log");
        }
        done += (size_t)n;
        size_t skip = (size_t)n;
        int j = 0;
        while (j < cnt && skip >= v[j].iov_len) skip -= v[j++].iov_len;
        if (j == cnt) break;
        memmove(v, v + j, (size_t)(cnt - j) * sizeof v[0]);
        cnt -= j;
        v[0].iov_base = (char *)v[0].iov_base + skip;
        v[0].iov_len -= skip;
    }
}

static void emit0(uint32_t type, uint32_t id, uint64_t off) { emit(type, id, off, NULL, 0); }

static void emit_str(uint32_t type, uint32_t id, const char *s) {
    struct iovec p = {(void *)s, strlen(s)};
    emit(type, id, 0, &p, 1);
}

static const char *id_name(uint32_t id);

/* The start of an event on file `id` (0: the directory): the cut happens here, before the call
 * does anything. */
static void tick_on(uint32_t id) {
    g_events++;
    int named = g_kill_name_at && id && strcmp(id_name(id), g_kill_name) == 0 && ++g_name_events == g_kill_name_at;
    if ((g_kill_at && g_events == g_kill_at) || named) {
        emit0(R_CUT, 0, g_events);
        syscall(SYS_kill, getpid(), SIGKILL);
        for (;;) pause();
    }
}

static int fd_ok(int fd) { return fd >= 0 && fd < FD_MAX; }

static int tracked(int fd) { return g_active && fd_ok(fd) && g_fds[fd].kind != FD_NONE; }

/* True when (dirfd, path) names an entry of the watched directory; copies its name. */
static int in_dir(int dirfd, const char *path, char name[NAME_MAX + 1]) {
    if (!g_active || !path) return 0;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t blen = strlen(base);
    if (blen == 0 || blen > NAME_MAX || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) return 0;
    struct stat st;
    int rc;
    if (slash) {
        char dir[PATH_MAX];
        size_t n = (size_t)(slash - path);
        if (n >= sizeof dir) return 0;
        if (n == 0) {
            dir[0] = '/';
            n = 1;
        } else {
            memcpy(dir, path, n);
        }
        dir[n] = '\0';
        rc = fstatat(dirfd, dir, &st, 0);
    } else {
        rc = fstatat(dirfd, ".", &st, 0);
    }
    if (rc != 0 || st.st_dev != g_dir_dev || st.st_ino != g_dir_ino) return 0;
    memcpy(name, base, blen + 1);
    return 1;
}

static int ends_with(const char *name, const char *suffix) {
    size_t n = strlen(name), s = strlen(suffix);
    return n >= s && strcmp(name + n - s, suffix) == 0;
}

/* Shared memory, mapped by the processes that have the store open: SQLite's WAL index (-shm)
 * and the library's watch ring (-watch), where writers note which agent each commit changed. */
static int is_shm(const char *name) {
    return ends_with(name, "-shm") || ends_with(name, "-watch");
}

/* A modelled file: in the directory, and not shared memory. */
static int modelled(int dirfd, const char *path, char name[NAME_MAX + 1]) {
    return in_dir(dirfd, path, name) && !is_shm(name);
}

static int inode_find(dev_t dev, ino_t ino) {
    for (int i = 0; i < INODES_MAX; i++)
        if (g_inodes[i].used && g_inodes[i].dev == dev && g_inodes[i].ino == ino) return i;
    return -1;
}

static uint32_t inode_add(dev_t dev, ino_t ino, const char *name) {
    for (int i = 0; i < INODES_MAX; i++) {
        if (!g_inodes[i].used) {
            g_inodes[i].used = 1;
            g_inodes[i].dev = dev;
            g_inodes[i].ino = ino;
            snprintf(g_inodes[i].name, sizeof g_inodes[i].name, "%s", name);
            g_inodes[i].id = g_next_id++;
            return g_inodes[i].id;
        }
    }
    errno = ENOMEM;
    die("too many modelled inodes");
    return 0;
}

/* The id of the modelled file (dev, ino) found under `name`, recording it as a file that
 * existed at the start when it is new to the shim. */
static uint32_t inode_id(dev_t dev, ino_t ino, const char *name) {
    int i = inode_find(dev, ino);
    if (i >= 0) return g_inodes[i].id;
    uint32_t id = inode_add(dev, ino, name);
    emit_str(R_BASE, id, name);
    return id;
}

static void unmodelled(const char *what, const char *name) {
    char msg[NAME_MAX + 128];
    snprintf(msg, sizeof msg, "%s (%s)", what, name ? name : "?");
    emit_str(R_UNMODELLED, 0, msg);
}

static const char *id_name(uint32_t id) {
    for (int i = 0; i < INODES_MAX; i++)
        if (g_inodes[i].used && g_inodes[i].id == id) return g_inodes[i].name;
    return "a modelled file";
}

/* The name of the modelled file open as fd (called with the lock held). */
static const char *fd_name(int fd) { return id_name(g_fds[fd].id); }

/* An event on the file open as fd, or on the directory. */
static void tick(int fd) { tick_on(g_fds[fd].kind == FD_FILE ? g_fds[fd].id : 0); }

/* ---------------------------------------------------------------- opening and closing */

static int shim_openat(int dirfd, const char *path, int flags, mode_t mode) {
    char name[NAME_MAX + 1];
    ENSURE();
    int tmpfile = (flags & O_TMPFILE) == O_TMPFILE;
    if (!g_active || tmpfile) return real_openat(dirfd, path, flags, mode);
    int is_file = modelled(dirfd, path, name);
    if (!is_file) {
        int fd = real_openat(dirfd, path, flags, mode);
        if (fd >= 0 && fd_ok(fd)) {
            struct stat st;
            int dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_dev == g_dir_dev && st.st_ino == g_dir_ino;
            pthread_mutex_lock(&g_mu);
            g_fds[fd].kind = dir ? FD_DIR : FD_NONE;
            pthread_mutex_unlock(&g_mu);
        }
        return fd;
    }
    pthread_mutex_lock(&g_mu);
    struct stat before;
    int existed = fstatat(dirfd, path, &before, 0) == 0;
    int writable = (flags & O_ACCMODE) != O_RDONLY;
    int creates = !existed && (flags & O_CREAT);
    int truncates = existed && (flags & O_TRUNC) && writable && S_ISREG(before.st_mode) && before.st_size > 0;
    if (creates || truncates) tick_on(0);
    int fd = real_openat(dirfd, path, flags, mode);
    int saved = errno;
    if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
            uint32_t id;
            if (creates) {
                int i = inode_find(st.st_dev, st.st_ino);
                if (i >= 0) g_inodes[i].used = 0; /* a reused inode number: a new file */
                id = inode_add(st.st_dev, st.st_ino, name);
                emit_str(R_CREATE, id, name);
            } else {
                id = inode_id(st.st_dev, st.st_ino, name);
                if (truncates) emit0(R_TRUNC, id, 0);
            }
            if (fd_ok(fd)) {
                g_fds[fd].kind = FD_FILE;
                g_fds[fd].id = id;
                g_fds[fd].append = (flags & O_APPEND) != 0;
            } else {
                unmodelled("file descriptor above the shim's table", name);
            }
        } else if (fd_ok(fd)) {
            g_fds[fd].kind = FD_NONE;
        }
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return fd;
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return shim_openat(AT_FDCWD, path, flags, m);
}

int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return shim_openat(AT_FDCWD, path, flags, m);
}

int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return shim_openat(dirfd, path, flags, m);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t m = mode_arg(flags, ap);
    va_end(ap);
    return shim_openat(dirfd, path, flags, m);
}

int __open_2(const char *path, int flags) { return shim_openat(AT_FDCWD, path, flags, 0); }
int __open64_2(const char *path, int flags) { return shim_openat(AT_FDCWD, path, flags, 0); }
int __openat_2(int dirfd, const char *path, int flags) { return shim_openat(dirfd, path, flags, 0); }
int __openat64_2(int dirfd, const char *path, int flags) { return shim_openat(dirfd, path, flags, 0); }
int creat(const char *path, mode_t mode) { return shim_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return shim_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

int close(int fd) {
    ENSURE();
    if (tracked(fd)) {
        pthread_mutex_lock(&g_mu);
        g_fds[fd].kind = FD_NONE;
        pthread_mutex_unlock(&g_mu);
    }
    return real_close(fd);
}

static void copy_fd(int from, int to) {
    if (!g_active || !fd_ok(from) || !fd_ok(to)) return;
    pthread_mutex_lock(&g_mu);
    g_fds[to] = g_fds[from];
    pthread_mutex_unlock(&g_mu);
}

static void forget_fd(int fd) {
    if (g_active && fd_ok(fd) && g_fds[fd].kind != FD_NONE) {
        pthread_mutex_lock(&g_mu);
        g_fds[fd].kind = FD_NONE;
        pthread_mutex_unlock(&g_mu);
    }
}

int dup(int fd) {
    int r = real_dup(fd);
    if (r >= 0) copy_fd(fd, r);
    return r;
}

int dup2(int fd, int to) {
    if (fd != to) forget_fd(to);
    int r = real_dup2(fd, to);
    if (r >= 0 && fd != to) copy_fd(fd, r);
    return r;
}

int dup3(int fd, int to, int flags) {
    forget_fd(to);
    int r = real_dup3(fd, to, flags);
    if (r >= 0) copy_fd(fd, r);
    return r;
}

static int shim_fcntl(int fd, int cmd, void *arg) {
    ENSURE();
    int r = real_fcntl(fd, cmd, arg);
    if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) copy_fd(fd, r);
    if (r >= 0 && cmd == F_SETFL && tracked(fd)) {
        pthread_mutex_lock(&g_mu);
        g_fds[fd].append = ((long)arg & O_APPEND) != 0;
        pthread_mutex_unlock(&g_mu);
    }
    return r;
}

int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return shim_fcntl(fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return shim_fcntl(fd, cmd, arg);
}

/* ---------------------------------------------------------------- writing */

static off_t position(int fd) {
    if (g_fds[fd].append) {
        struct stat st;
        return fstat(fd, &st) == 0 ? st.st_size : -1;
    }
    return lseek(fd, 0, SEEK_CUR);
}

/* Records `done` bytes of iov written at `off`. */
static void record_iov(uint32_t id, off_t off, const struct iovec *iov, int cnt, size_t done) {
    for (int i = 0; i < cnt && done > 0; i++) {
        size_t n = iov[i].iov_len < done ? iov[i].iov_len : done;
        if (n == 0) continue;
        struct iovec p = {iov[i].iov_base, n};
        emit(R_WRITE, id, (uint64_t)off, &p, 1);
        off += (off_t)n;
        done -= n;
    }
}

ssize_t write(int fd, const void *buf, size_t n) {
    ENSURE();
    if (!tracked(fd) || g_fds[fd].kind != FD_FILE) return real_write(fd, buf, n);
    pthread_mutex_lock(&g_mu);
    tick(fd);
    off_t off = position(fd);
    ssize_t r = real_write(fd, buf, n);
    int saved = errno;
    if (r > 0) {
        struct iovec p = {(void *)buf, (size_t)r};
        record_iov(g_fds[fd].id, off, &p, 1, (size_t)r);
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

static ssize_t do_pwrite(int fd, const void *buf, size_t n, off_t off) {
    if (!tracked(fd) || g_fds[fd].kind != FD_FILE) return real_pwrite(fd, buf, n, off);
    pthread_mutex_lock(&g_mu);
    tick(fd);
    ssize_t r = real_pwrite(fd, buf, n, off);
    int saved = errno;
    if (r > 0) {
        struct iovec p = {(void *)buf, (size_t)r};
        record_iov(g_fds[fd].id, off, &p, 1, (size_t)r);
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { return do_pwrite(fd, buf, n, off); }
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) { return do_pwrite(fd, buf, n, (off_t)off); }

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    if (!tracked(fd) || g_fds[fd].kind != FD_FILE) return real_writev(fd, iov, cnt);
    pthread_mutex_lock(&g_mu);
    tick(fd);
    off_t off = position(fd);
    ssize_t r = real_writev(fd, iov, cnt);
    int saved = errno;
    if (r > 0) record_iov(g_fds[fd].id, off, iov, cnt, (size_t)r);
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

static ssize_t do_pwritev(int fd, const struct iovec *iov, int cnt, off_t off, int flags, int v2) {
    if (!tracked(fd) || g_fds[fd].kind != FD_FILE) {
        if (v2) {
            if (!real_pwritev2) {
                errno = ENOSYS;
                return -1;
            }
            return real_pwritev2(fd, iov, cnt, off, flags);
        }
        return real_pwritev(fd, iov, cnt, off);
    }
    pthread_mutex_lock(&g_mu);
    tick(fd);
    off_t at = (v2 && off == -1) ? position(fd) : off;
    ssize_t r;
    if (v2) {
        if (real_pwritev2) {
            r = real_pwritev2(fd, iov, cnt, off, flags);
        } else {
            errno = ENOSYS;
            r = -1;
        }
    } else {
        r = real_pwritev(fd, iov, cnt, off);
    }
    int saved = errno;
    if (r > 0) record_iov(g_fds[fd].id, at, iov, cnt, (size_t)r);
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) { return do_pwritev(fd, iov, cnt, off, 0, 0); }
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off) { return do_pwritev(fd, iov, cnt, (off_t)off, 0, 0); }
ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) { return do_pwritev(fd, iov, cnt, off, flags, 1); }
ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags) {
    return do_pwritev(fd, iov, cnt, (off_t)off, flags, 1);
}

static int do_ftruncate(int fd, off_t len) {
    if (!tracked(fd) || g_fds[fd].kind != FD_FILE) return real_ftruncate(fd, len);
    pthread_mutex_lock(&g_mu);
    tick(fd);
    int r = real_ftruncate(fd, len);
    int saved = errno;
    if (r == 0) emit0(R_TRUNC, g_fds[fd].id, (uint64_t)len);
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

int ftruncate(int fd, off_t len) { return do_ftruncate(fd, len); }
int ftruncate64(int fd, off64_t len) { return do_ftruncate(fd, (off_t)len); }

static int do_truncate(const char *path, off_t len) {
    char name[NAME_MAX + 1];
    struct stat st;
    if (!modelled(AT_FDCWD, path, name) || stat(path, &st) != 0) return real_truncate(path, len);
    pthread_mutex_lock(&g_mu);
    tick_on(0);
    int r = real_truncate(path, len);
    int saved = errno;
    if (r == 0) emit0(R_TRUNC, inode_id(st.st_dev, st.st_ino, name), (uint64_t)len);
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

int truncate(const char *path, off_t len) { return do_truncate(path, len); }
int truncate64(const char *path, off64_t len) { return do_truncate(path, (off_t)len); }

static int do_fallocate(int fd, int mode, off_t off, off_t len, int posix) {
    if (!tracked(fd) || g_fds[fd].kind != FD_FILE)
        return posix ? real_posix_fallocate(fd, off, len) : real_fallocate(fd, mode, off, len);
    pthread_mutex_lock(&g_mu);
    tick(fd);
    int r = posix ? real_posix_fallocate(fd, off, len) : real_fallocate(fd, mode, off, len);
    int saved = errno;
    if ((posix && r == 0) || (!posix && r == 0)) {
        if (mode == 0)
            emit0(R_EXTEND, g_fds[fd].id, (uint64_t)(off + len));
        else if (mode != FALLOC_FL_KEEP_SIZE)
            unmodelled("fallocate with a mode other than 0 or KEEP_SIZE", fd_name(fd));
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

int fallocate(int fd, int mode, off_t off, off_t len) { return do_fallocate(fd, mode, off, len, 0); }
int fallocate64(int fd, int mode, off64_t off, off64_t len) { return do_fallocate(fd, mode, (off_t)off, (off_t)len, 0); }
int posix_fallocate(int fd, off_t off, off_t len) { return do_fallocate(fd, 0, off, len, 1); }
int posix_fallocate64(int fd, off64_t off, off64_t len) { return do_fallocate(fd, 0, (off_t)off, (off_t)len, 1); }

/* ---------------------------------------------------------------- syncing */

static int do_sync(int fd, int data_only) {
    if (!tracked(fd)) return data_only ? real_fdatasync(fd) : real_fsync(fd);
    pthread_mutex_lock(&g_mu);
    tick(fd);
    int r = 0;
    if (g_real_sync) r = data_only ? real_fdatasync(fd) : real_fsync(fd);
    int saved = errno;
    if (r == 0) {
        if (g_fds[fd].kind == FD_DIR)
            emit0(R_DIRSYNC, 0, 0);
        else if (!g_drop_sync)
            emit0(R_SYNC, g_fds[fd].id, 0);
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

int fsync(int fd) { return do_sync(fd, 0); }
int fdatasync(int fd) { return do_sync(fd, 1); }

void sync(void) {
    if (!g_active) {
        real_sync();
        return;
    }
    pthread_mutex_lock(&g_mu);
    tick_on(0);
    if (g_real_sync) real_sync();
    if (!g_drop_sync) emit0(R_SYNCALL, 0, 0);
    pthread_mutex_unlock(&g_mu);
}

int syncfs(int fd) {
    if (!g_active) return real_syncfs(fd);
    pthread_mutex_lock(&g_mu);
    tick_on(0);
    int r = g_real_sync ? real_syncfs(fd) : 0;
    int saved = errno;
    if (r == 0 && !g_drop_sync) emit0(R_SYNCALL, 0, 0);
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

/* ---------------------------------------------------------------- the directory */

static int do_unlinkat(int dirfd, const char *path, int flags) {
    char name[NAME_MAX + 1];
    struct stat st;
    if ((flags & AT_REMOVEDIR) || !modelled(dirfd, path, name) || fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return real_unlinkat(dirfd, path, flags);
    pthread_mutex_lock(&g_mu);
    tick_on(0);
    int r = real_unlinkat(dirfd, path, flags);
    int saved = errno;
    if (r == 0) {
        emit_str(R_UNLINK, 0, name);
        int i = inode_find(st.st_dev, st.st_ino);
        if (i >= 0 && st.st_nlink <= 1) g_inodes[i].used = 0;
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

int unlink(const char *path) { return do_unlinkat(AT_FDCWD, path, 0); }
int unlinkat(int dirfd, const char *path, int flags) { return do_unlinkat(dirfd, path, flags); }
int remove(const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) return real_unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
    return do_unlinkat(AT_FDCWD, path, 0);
}

static int do_renameat(int olddir, const char *oldp, int newdir, const char *newp, unsigned flags, int v2) {
    char a[NAME_MAX + 1], b[NAME_MAX + 1];
    int in_a = in_dir(olddir, oldp, a), in_b = in_dir(newdir, newp, b);
    if (!in_a && !in_b) return v2 ? real_renameat2(olddir, oldp, newdir, newp, flags) : real_renameat(olddir, oldp, newdir, newp);
    pthread_mutex_lock(&g_mu);
    tick_on(0);
    struct stat st;
    int have = fstatat(olddir, oldp, &st, AT_SYMLINK_NOFOLLOW) == 0;
    int r = v2 ? real_renameat2(olddir, oldp, newdir, newp, flags) : real_renameat(olddir, oldp, newdir, newp);
    int saved = errno;
    if (r == 0) {
        if (!in_a || !in_b || is_shm(a) != is_shm(b) || flags != 0) {
            unmodelled("rename into, out of or within the directory that the model cannot follow", in_b ? b : a);
        } else if (!is_shm(a)) {
            if (have) (void)inode_id(st.st_dev, st.st_ino, a);
            struct iovec p[3] = {{a, strlen(a)}, {"", 1}, {b, strlen(b)}};
            emit(R_RENAME, 0, 0, p, 3);
        }
    }
    pthread_mutex_unlock(&g_mu);
    errno = saved;
    return r;
}

int rename(const char *oldp, const char *newp) { return do_renameat(AT_FDCWD, oldp, AT_FDCWD, newp, 0, 0); }
int renameat(int od, const char *oldp, int nd, const char *newp) { return do_renameat(od, oldp, nd, newp, 0, 0); }
int renameat2(int od, const char *oldp, int nd, const char *newp, unsigned flags) {
    return do_renameat(od, oldp, nd, newp, flags, 1);
}

int link(const char *oldp, const char *newp) {
    char n[NAME_MAX + 1];
    int r = real_linkat(AT_FDCWD, oldp, AT_FDCWD, newp, 0);
    if (r == 0 && modelled(AT_FDCWD, newp, n)) {
        pthread_mutex_lock(&g_mu);
        unmodelled("hard link", n);
        pthread_mutex_unlock(&g_mu);
    }
    return r;
}

int linkat(int od, const char *oldp, int nd, const char *newp, int flags) {
    char n[NAME_MAX + 1];
    int r = real_linkat(od, oldp, nd, newp, flags);
    if (r == 0 && modelled(nd, newp, n)) {
        pthread_mutex_lock(&g_mu);
        unmodelled("hard link", n);
        pthread_mutex_unlock(&g_mu);
    }
    return r;
}

/* ---------------------------------------------------------------- what the model cannot follow */

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    ENSURE();
    if (tracked(fd) && g_fds[fd].kind == FD_FILE && (prot & PROT_WRITE) && (flags & MAP_SHARED)) {
        pthread_mutex_lock(&g_mu);
        unmodelled("writable shared mmap", fd_name(fd));
        pthread_mutex_unlock(&g_mu);
    }
    return real_mmap(addr, len, prot, flags, fd, off);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) { return do_mmap(addr, len, prot, flags, fd, off); }
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
    return do_mmap(addr, len, prot, flags, fd, (off_t)off);
}

ssize_t copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t len, unsigned flags) {
    if (tracked(out)) {
        pthread_mutex_lock(&g_mu);
        unmodelled("copy_file_range", fd_name(out));
        pthread_mutex_unlock(&g_mu);
    }
    return real_copy_file_range(in, inoff, out, outoff, len, flags);
}

ssize_t sendfile(int out, int in, off_t *off, size_t len) {
    if (tracked(out)) {
        pthread_mutex_lock(&g_mu);
        unmodelled("sendfile", fd_name(out));
        pthread_mutex_unlock(&g_mu);
    }
    return real_sendfile(out, in, off, len);
}
ssize_t sendfile64(int out, int in, off64_t *off, size_t len) { return sendfile(out, in, (off_t *)off, len); }
