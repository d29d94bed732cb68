/* files.c — whole-file I/O, private temp folders, recursive removal. */
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int kg_fd_read(int fd, const char *name, size_t max_bytes, char **data, size_t *len, kg_error *err)
{
    *data = NULL;
    if (len)
        *len = 0;
    kg_buf b = {0};
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            kg_buf_free(&b);
            return kg_error_set(err, KG_ERR_IO, "cannot read %s: %s", name, strerror(e));
        }
        if (n == 0)
            break;
        if (max_bytes && b.len + (size_t)n > max_bytes) {
            kg_buf_free(&b);
            return kg_error_set(err, KG_ERR_INVALID, "%s is larger than the limit of %zu bytes", name,
                                max_bytes);
        }
        if (kg_buf_append(&b, chunk, (size_t)n) != KG_OK) {
            kg_buf_free(&b);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory reading %s", name);
        }
    }
    if (len)
        *len = b.len;
    *data = kg_buf_release(&b);
    return *data ? KG_OK : kg_error_set(err, KG_ERR_NOMEM, "out of memory");
}

int kg_file_read(const char *path, size_t max_bytes, char **data, size_t *len, kg_error *err)
{
    *data = NULL;
    if (len)
        *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kg_error_set(err, errno == ENOENT ? KG_ERR_NOT_FOUND : KG_ERR_IO,
                            "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return kg_error_set(err, KG_ERR_INVALID, "%s is a folder, not a file", path);
    }
    int rc = kg_fd_read(fd, path, max_bytes, data, len, err);
    close(fd);
    return rc;
}

int kg_file_write(const char *path, const void *data, size_t len, kg_error *err)
{
    return kg_file_write_mode(path, data, len, 0600, err);
}

int kg_fd_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int kg_file_write_mode(const char *path, const void *data, size_t len, unsigned mode, kg_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return kg_error_set(err, KG_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    if (kg_fd_write_all(fd, data, len) != 0) {
        int e = errno;
        close(fd);
        return kg_error_set(err, KG_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    if (close(fd) != 0)
        return kg_error_set(err, KG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return KG_OK;
}

/* ---- atomic replacement ------------------------------------------------- */

int kg_atomic_begin(kg_atomic_file *f, const char *path, unsigned mode, kg_error *err)
{
    static unsigned long counter;
    f->fd = -1;
    f->tmp = NULL;
    f->path = NULL;
    if (!path || !*path)
        return kg_error_set(err, KG_ERR_INVALID, "no file name to write");
    /* Beside the file (rename() does not cross file systems), hidden, and
     * unique per process and call, so concurrent writers of one path never
     * share a temp file; O_EXCL because the name is guessable.  The umask
     * applies to mode, as for kg_file_write_mode. */
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path + 1) : 0;
    kg_buf name = {0};
    for (int tries = 0; tries < 100; tries++) {
        name.len = 0;
        if (kg_buf_printf(&name, "%.*s" KG_FILE_TEMP_PREFIX "%s-%ld-%lu", dirlen, path, path + dirlen,
                          (long)getpid(), __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED)) != KG_OK) {
            kg_buf_free(&name);
            return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
        }
        f->fd = open(name.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
        if (f->fd >= 0 || errno != EEXIST)
            break;
    }
    if (f->fd < 0) {
        int e = errno;
        kg_buf_free(&name);
        return kg_error_set(err, KG_ERR_IO, "cannot create a temporary file for %s: %s", path, strerror(e));
    }
    f->tmp = kg_buf_release(&name);
    f->path = kg_strdup(path);
    if (!f->tmp || !f->path) {
        kg_atomic_abort(f);
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    }
    return KG_OK;
}

void kg_atomic_abort(kg_atomic_file *f)
{
    if (f->fd >= 0)
        close(f->fd);
    if (f->tmp)
        unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    f->fd = -1;
    f->tmp = f->path = NULL;
}

int kg_atomic_commit(kg_atomic_file *f, kg_error *err)
{
    if (f->fd < 0 || !f->tmp || !f->path) {
        kg_atomic_abort(f);
        return kg_error_set(err, KG_ERR_INVALID, "atomic write: nothing begun");
    }
    /* fsync before rename: otherwise a crash can leave the new name pointing
     * at a file whose data never reached the disk (an empty file where the
     * old one was). */
    int rc = KG_OK;
    if (fsync(f->fd) != 0)
        rc = kg_error_set(err, KG_ERR_IO, "cannot write %s: fsync: %s", f->path, strerror(errno));
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0 && rc == KG_OK)
        rc = kg_error_set(err, KG_ERR_IO, "cannot write %s: %s", f->path, strerror(errno));
    /* rename() is atomic: a reader sees the old file or the new one. */
    if (rc == KG_OK && rename(f->tmp, f->path) != 0)
        rc = kg_error_set(err, KG_ERR_IO, "cannot replace %s: %s", f->path, strerror(errno));
    if (rc != KG_OK) {
        kg_atomic_abort(f);
        return rc;
    }
    /* And the folder, so that the rename itself survives a crash.  Some file
     * systems refuse fsync on a folder (EINVAL): nothing more can be done. */
    const char *slash = strrchr(f->path, '/');
    if (slash)
        *(char *)slash = '\0';
    int dfd = open(slash ? (slash == f->path ? "/" : f->path) : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (slash)
        *(char *)slash = '/';
    if (dfd >= 0) {
        if (fsync(dfd) != 0 && errno != EINVAL && errno != EROFS)
            rc = kg_error_set(err, KG_ERR_IO, "cannot write %s: fsync of its folder: %s", f->path,
                              strerror(errno));
        close(dfd);
    }
    free(f->tmp);
    free(f->path);
    f->tmp = f->path = NULL;
    return rc;
}

int kg_file_write_atomic(const char *path, const void *data, size_t len, unsigned mode, kg_error *err)
{
    kg_atomic_file f;
    int rc = kg_atomic_begin(&f, path, mode, err);
    if (rc != KG_OK)
        return rc;
    if (kg_fd_write_all(f.fd, data, len) != 0) {
        rc = kg_error_set(err, KG_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        kg_atomic_abort(&f);
        return rc;
    }
    return kg_atomic_commit(&f, err);
}

int kg_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int kg_dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int kg_temp_dir(const char *prefix, char **path, kg_error *err)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    kg_buf b = {0};
    if (kg_buf_printf(&b, "%s/%s-XXXXXX", base, prefix) != KG_OK)
        return kg_error_set(err, KG_ERR_NOMEM, "out of memory");
    if (!mkdtemp(b.data)) {
        int e = errno;
        kg_buf_free(&b);
        return kg_error_set(err, KG_ERR_IO, "cannot make a temp folder under %s: %s", base,
                            strerror(e));
    }
    *path = kg_buf_release(&b);
    return KG_OK;
}

/* The mark of a folder made by kg_temp_dir_owned: made only once its maker holds the folder's lock. */
#define KG_OWNER_MARK ".kgym-owner"

int kg_temp_dir_owned(const char *prefix, char **path, int *lock_fd, kg_error *err)
{
    *lock_fd = -1;
    int rc = kg_temp_dir(prefix, path, err);
    if (rc != KG_OK)
        return rc;
    kg_buf mark = {0};
    int fd = open(*path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    int e = fd < 0 ? errno : 0;
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0)
        e = errno;
    if (!e && kg_buf_printf(&mark, "%s/%s", *path, KG_OWNER_MARK) != KG_OK)
        e = ENOMEM;
    int m = e ? -1 : open(mark.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (!e && m < 0)
        e = errno;
    if (m >= 0)
        close(m);
    kg_buf_free(&mark);
    if (e) {
        if (fd >= 0)
            close(fd);
        kg_remove_tree(*path);
        free(*path);
        *path = NULL;
        return kg_error_set(err, e == ENOMEM ? KG_ERR_NOMEM : KG_ERR_IO, "cannot lock a temp folder: %s",
                            strerror(e));
    }
    *lock_fd = fd;
    return KG_OK;
}

int kg_temp_sweep(const char *prefix)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    DIR *d = opendir(base);
    if (!d)
        return 0;
    size_t plen = strlen(prefix);
    int removed = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        /* prefix-XXXXXX, as kg_temp_dir names them */
        if (strncmp(ent->d_name, prefix, plen) != 0 || ent->d_name[plen] != '-' || strlen(ent->d_name) != plen + 7)
            continue;
        kg_buf dir = {0}, mark = {0};
        struct stat st;
        if (kg_buf_printf(&dir, "%s/%s", base, ent->d_name) == KG_OK &&
            kg_buf_printf(&mark, "%s/%s", dir.data, KG_OWNER_MARK) == KG_OK && lstat(dir.data, &st) == 0 &&
            S_ISDIR(st.st_mode) && st.st_uid == geteuid() && lstat(mark.data, &st) == 0 && S_ISREG(st.st_mode)) {
            /* Marked: its maker held the lock when it marked it.  A lock we can take now is a maker gone (a lock
             * dies with the last process holding it): what it left is removed, the lock held meanwhile. */
            int fd = open(dir.data, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
            if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
                kg_remove_tree(dir.data);
                removed++;
            }
            if (fd >= 0)
                close(fd);
        }
        kg_buf_free(&dir);
        kg_buf_free(&mark);
    }
    closedir(d);
    return removed;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

static int open_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)ftw;
    if (flag == FTW_D || flag == FTW_DNR)
        chmod(path, (st->st_mode & 07777) | S_IRWXU);
    return 0;
}

int kg_remove_tree(const char *path)
{
    if (!path || !*path || strcmp(path, "/") == 0)
        return KG_ERR_INVALID;
    /* First every folder opened to its owner, parents before children: an evaluation's source folder is
     * read-only on purpose (the runner must not change the checked source; when kgym is not root the runner
     * runs as our uid and could leave a 0000 folder), and a file in a read-only folder cannot be removed.
     * Only our own folders change (chmod needs ownership or root); symlinks are never followed. */
    nftw(path, open_entry, 16, FTW_PHYS);
    /* FTW_DEPTH: children before parents; FTW_PHYS: never follow a symlink a
     * candidate may have planted pointing outside its folder. */
    return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? KG_OK : KG_ERR_IO;
}

double kg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double kg_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int kg_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc)
        return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (!rc)
        rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

void kg_deadline_in(struct timespec *ts, double seconds)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    if (seconds < 0)
        seconds = 0;
    long long ns = (long long)(seconds * 1e9) + ts->tv_nsec;
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

char *kg_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}
