/*
 * test_util.c — util's one-of-each helpers: the atomic file write
 * (kg_file_write_atomic, kg_atomic_*), the retry pause (kg_backoff_*) and
 * SHA-256 (kg_sha256_*; its key encoding is pinned in test_refcache.c), and
 * the line reader (kg_lines_*) the supervisor reads the zygote and the judge
 * with.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kg_test.h"
#include "util/json.h"
#include "util/util.h"

static char *tmpdir(void)
{
    char *d = NULL;
    kg_error err;
    KG_CHECK(kg_temp_dir("kgym-test-util", &d, &err) == KG_OK);
    return d;
}

/* Files in dir whose name starts with prefix. */
static int count_names(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (!strncmp(de->d_name, prefix, strlen(prefix)))
            n++;
    closedir(d);
    return n;
}

static void atomic_write_creates_and_replaces(void)
{
    char *d = tmpdir();
    if (!d)
        return;
    char path[4096], *data = NULL;
    size_t len = 0;
    kg_error err;
    snprintf(path, sizeof path, "%s/state.json", d);
    KG_CHECK(kg_file_write_atomic(path, "first", 5, 0600, &err) == KG_OK);
    KG_CHECK(kg_file_read(path, 0, &data, &len, &err) == KG_OK && len == 5 && !memcmp(data, "first", 5));
    free(data);
    KG_CHECK(kg_file_write_atomic(path, "second!", 7, 0600, &err) == KG_OK);
    KG_CHECK(kg_file_read(path, 0, &data, &len, &err) == KG_OK && len == 7 && !memcmp(data, "second!", 7));
    free(data);
    struct stat st;
    KG_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    KG_CHECK(count_names(d, KG_FILE_TEMP_PREFIX) == 0);
    KG_CHECK(count_names(d, "") == 3); /* ".", "..", state.json */
    /* A bare name is relative to the working folder (its folder is "."). */
    char cwd[4096];
    KG_CHECK(getcwd(cwd, sizeof cwd) != NULL);
    KG_CHECK(chdir(d) == 0);
    KG_CHECK(kg_file_write_atomic("bare.txt", "x", 1, 0644, &err) == KG_OK);
    KG_CHECK(kg_file_exists("bare.txt"));
    KG_CHECK(chdir(cwd) == 0);
    kg_remove_tree(d);
    free(d);
}

static void atomic_write_failure_leaves_old_file_and_no_temp(void)
{
    char *d = tmpdir();
    if (!d)
        return;
    char path[4096];
    kg_error err;
    /* A folder where the file should be: rename() fails after the data was
     * written, so the temp file must go and the folder stay. */
    snprintf(path, sizeof path, "%s/taken", d);
    KG_CHECK(mkdir(path, 0700) == 0);
    kg_error_clear(&err);
    KG_CHECK(kg_file_write_atomic(path, "data", 4, 0600, &err) == KG_ERR_IO);
    KG_CHECK(strstr(err.message, path) != NULL);
    KG_CHECK(kg_dir_exists(path));
    KG_CHECK(count_names(d, KG_FILE_TEMP_PREFIX) == 0);
    /* No such folder: nothing is created, the message names the file. */
    snprintf(path, sizeof path, "%s/missing/file", d);
    kg_error_clear(&err);
    KG_CHECK(kg_file_write_atomic(path, "data", 4, 0600, &err) == KG_ERR_IO);
    KG_CHECK(strstr(err.message, path) != NULL);
    KG_CHECK(kg_file_write_atomic("", "x", 1, 0600, &err) == KG_ERR_INVALID);
    kg_remove_tree(d);
    free(d);
}

static void atomic_stream_commit_and_abort(void)
{
    char *d = tmpdir();
    if (!d)
        return;
    char path[4096], *data = NULL;
    size_t len = 0;
    kg_error err;
    snprintf(path, sizeof path, "%s/out.jsonl", d);
    KG_CHECK(kg_file_write_atomic(path, "old\n", 4, 0644, &err) == KG_OK);
    kg_atomic_file f;
    KG_CHECK(kg_atomic_begin(&f, path, 0644, &err) == KG_OK);
    KG_CHECK(kg_fd_write_all(f.fd, "new 1\n", 6) == 0 && kg_fd_write_all(f.fd, "new 2\n", 6) == 0);
    /* Before the commit, readers still see the old file. */
    KG_CHECK(kg_file_read(path, 0, &data, &len, &err) == KG_OK && len == 4 && !memcmp(data, "old\n", 4));
    free(data);
    KG_CHECK(count_names(d, KG_FILE_TEMP_PREFIX) == 1);
    KG_CHECK(kg_atomic_commit(&f, &err) == KG_OK);
    KG_CHECK(f.fd == -1 && f.tmp == NULL && f.path == NULL);
    KG_CHECK(kg_file_read(path, 0, &data, &len, &err) == KG_OK && len == 12 && !memcmp(data, "new 1\nnew 2\n", 12));
    free(data);
    KG_CHECK(kg_atomic_begin(&f, path, 0644, &err) == KG_OK);
    KG_CHECK(kg_fd_write_all(f.fd, "dropped", 7) == 0);
    kg_atomic_abort(&f);
    KG_CHECK(kg_file_read(path, 0, &data, &len, &err) == KG_OK && len == 12);
    free(data);
    KG_CHECK(count_names(d, KG_FILE_TEMP_PREFIX) == 0);
    kg_remove_tree(d);
    free(d);
}

static void backoff_doubles_caps_and_obeys_retry_after(void)
{
    const kg_backoff b = {.base_s = 0.1, .max_s = 5};
    KG_CHECK_NEAR(kg_backoff_delay(&b, 1, -1), 0.1, 1e-12);
    KG_CHECK_NEAR(kg_backoff_delay(&b, 2, -1), 0.2, 1e-12);
    KG_CHECK_NEAR(kg_backoff_delay(&b, 6, -1), 3.2, 1e-12);
    KG_CHECK_NEAR(kg_backoff_delay(&b, 7, -1), 5, 1e-12);
    KG_CHECK_NEAR(kg_backoff_delay(&b, 10000, -1), 5, 1e-12); /* 2^9999 is inf: still the cap */
    KG_CHECK_NEAR(kg_backoff_delay(&b, 0, -1), 0.1, 1e-12);
    /* The server's Retry-After replaces the exponential pause, capped too. */
    KG_CHECK_NEAR(kg_backoff_delay(&b, 6, 0), 0, 1e-12);
    KG_CHECK_NEAR(kg_backoff_delay(&b, 1, 2.5), 2.5, 1e-12);
    KG_CHECK_NEAR(kg_backoff_delay(&b, 1, 120), 5, 1e-12);
    /* evaluate.c's old sleep(1 << (n-1)), at most 16. */
    const kg_backoff e = {.base_s = 1, .max_s = 16};
    for (int n = 1; n <= 8; n++)
        KG_CHECK_NEAR(kg_backoff_delay(&e, n, -1), n < 5 ? (double)(1u << (n - 1)) : 16.0, 1e-12);
    double t0 = kg_now_ms();
    kg_backoff_sleep(0.05);
    double took = kg_now_ms() - t0;
    KG_CHECK(took >= 49 && took < 2000);
    kg_backoff_sleep(-1); /* returns at once */
}

static void sha256_hex_and_prefixed(void)
{
    char hex[65], pre[KG_SHA256_STRLEN];
    KG_CHECK(kg_sha256_hex("abc", 3, hex) == KG_OK);
    KG_CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    KG_CHECK(kg_sha256_string("abc", 3, pre) == KG_OK);
    KG_CHECK_STR(pre, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    KG_CHECK(kg_sha256_hex(NULL, 0, hex) == KG_OK);
    KG_CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* Fields: moving a byte across a boundary changes the key. */
    kg_error err;
    char x[65], y[65];
    const kg_hash_field a[] = {KG_HASH_STR("a|b"), KG_HASH_STR("c")};
    const kg_hash_field b[] = {KG_HASH_STR("a"), KG_HASH_STR("b|c")};
    KG_CHECK(kg_sha256_fields(a, 2, x, &err) == KG_OK && kg_sha256_fields(b, 2, y, &err) == KG_OK);
    KG_CHECK(strlen(x) == 64 && strcmp(x, y) != 0);
}

static void json_building_is_checked(void)
{
    /* Text that is not UTF-8 is kept, with '?' for each bad byte, instead of
     * the NULL json_string gives (which json_object_set_new turns into a
     * silently missing field). */
    json_t *t = kg_json_text("ok \xff\xfe end");
    KG_CHECK(json_is_string(t));
    KG_CHECK_STR(json_string_value(t), "ok ?? end");
    json_decref(t);
    t = kg_json_textn("a\0b\xc3", 4); /* an embedded NUL stays, the torn sequence after it goes */
    KG_CHECK(json_is_string(t) && json_string_length(t) == 4 && !memcmp(json_string_value(t), "a\0b?", 4));
    json_decref(t);
    t = kg_json_text("caf\xc3\xa9"); /* valid UTF-8 unchanged */
    KG_CHECK_STR(json_string_value(t), "caf\xc3\xa9");
    json_decref(t);
    KG_CHECK(json_is_null(kg_json_text(NULL)));
    /* kg_utf8_valid agrees with jansson, and only reads (a path is never sanitized). */
    const char *texts[] = {"plain", "caf\xc3\xa9", "\xff", "a\xc3", "\xed\xa0\x80" /* a surrogate */,
                           "\xe0\x80\xaf" /* overlong */, "\xf4\x90\x80\x80" /* past U+10FFFF */, ""};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        json_t *j = json_string(texts[i]);
        KG_CHECK(kg_utf8_valid(texts[i]) == (j != NULL));
        json_decref(j);
    }
    char bad[] = "x\xffy";
    KG_CHECK(!kg_utf8_valid(bad) && bad[1] == '\xff');
    /* A number JSON cannot hold is null ("not measured"), not a lost field. */
    KG_CHECK(json_is_null(kg_json_number(NAN)) && json_is_null(kg_json_number(INFINITY)));
    t = kg_json_number(1.5);
    KG_CHECK(json_is_real(t) && json_real_value(t) == 1.5);
    json_decref(t);
    /* Set and push say when they fail, and take the value's reference either way (ASan checks the leaks). */
    json_t *o = json_object(), *a = json_array();
    KG_CHECK(kg_json_set(o, "k", json_integer(1)) == 0 && json_integer_value(json_object_get(o, "k")) == 1);
    KG_CHECK(kg_json_set(o, "nan", json_real(NAN)) == -1 && !json_object_get(o, "nan"));
    KG_CHECK(kg_json_set(NULL, "k", json_integer(2)) == -1);
    KG_CHECK(kg_json_set(o, "bad\xff", json_integer(3)) == -1); /* a key that is not UTF-8 */
    KG_CHECK(kg_json_push(a, json_string("x")) == 0 && json_array_size(a) == 1);
    KG_CHECK(kg_json_push(a, NULL) == -1 && json_array_size(a) == 1);
    KG_CHECK(kg_json_push(NULL, json_string("y")) == -1);
    json_decref(o);
    json_decref(a);
}

/* kg_lines: what one read brings beyond a line is the next line's (the zygote's and a warm judge's readers used to
 * read a byte at a time for that), a line over the limit is refused whole instead of cut (a cut line's rest was
 * read as the next answer), and the caller's limit, time and end are each told apart. */
static void lines_split_keep_and_refuse(void)
{
    int sv[2];
    KG_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    kg_lines r = {0};
    char *line = NULL;
    size_t len = 0;
    /* Two lines and a part of a third in one write: one read takes them all; each comes out in turn. */
    const char first[] = "ready {\"a\": 1}\nforked 42 []\npart";
    KG_CHECK(write(sv[1], first, sizeof first - 1) == (ssize_t)(sizeof first - 1));
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 1000, &line, &len) == 1);
    KG_CHECK(len == 14 && !strcmp(line, "ready {\"a\": 1}"));
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 1000, &line, &len) == 1);
    KG_CHECK_STR(line, "forked 42 []");
    KG_CHECK(kg_lines_next(&r, 100, &line, &len) == 0); /* "part" is not a line yet */
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 50, &line, &len) == KG_LINES_TIMEOUT);
    /* The rest of it, with a NUL byte inside: the length says where the line ends. */
    KG_CHECK(write(sv[1], "\0x\n", 3) == 3);
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 1000, &line, &len) == 1);
    KG_CHECK(len == 6 && !memcmp(line, "part\0x", 6));
    /* The limit counts the line without its '\n': max bytes pass, one more is refused, whole or not. */
    KG_CHECK(write(sv[1], "12345\n123456\n", 13) == 13);
    KG_CHECK(kg_lines_read(&r, sv[0], 5, 1000, &line, &len) == 1 && len == 5);
    KG_CHECK(kg_lines_read(&r, sv[0], 5, 1000, &line, &len) == KG_LINES_TOO_LONG);
    kg_lines_free(&r);
    KG_CHECK(write(sv[1], "1234567", 7) == 7); /* no '\n' yet, already over */
    KG_CHECK(kg_lines_fill(&r, sv[0]) == 7);
    KG_CHECK(kg_lines_next(&r, 5, &line, &len) == KG_LINES_TOO_LONG);
    kg_lines_free(&r);
    /* Many lines through one reader: what it holds stays one line's worth. */
    kg_buf many = {0};
    for (int i = 0; i < 1000; i++)
        KG_CHECK(kg_buf_puts(&many, "0123456789\n") == KG_OK);
    KG_CHECK(kg_fd_write_all(sv[1], many.data, many.len) == 0);
    kg_buf_free(&many);
    int n = 0;
    while (kg_lines_read(&r, sv[0], 100, 50, &line, &len) == 1)
        n += len == 10 && !strcmp(line, "0123456789");
    KG_CHECK(n == 1000);
    KG_CHECK(r.buf.len - r.start == 0);
    /* A long line in many reads, behind a whole one: the part already searched is not searched again (scanned
     * follows what has no '\n'), and the line still comes out whole, then the next one. */
    KG_CHECK(write(sv[1], "a\nbb", 4) == 4);
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 1000, &line, &len) == 1 && len == 1);
    KG_CHECK(kg_lines_next(&r, 100, &line, &len) == 0 && r.scanned == 2);
    for (int i = 0; i < 10; i++) {
        KG_CHECK(write(sv[1], "bbbbb", 5) == 5);
        KG_CHECK(kg_lines_fill(&r, sv[0]) == 5);
        KG_CHECK(kg_lines_next(&r, 100, &line, &len) == 0 && r.scanned == 7 + 5 * (size_t)i);
    }
    KG_CHECK(write(sv[1], "\nc\n", 3) == 3);
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 1000, &line, &len) == 1 && len == 52 && line[51] == 'b');
    KG_CHECK(r.scanned == 0);
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 1000, &line, &len) == 1);
    KG_CHECK_STR(line, "c");
    /* The end of the stream before a whole line. */
    KG_CHECK(write(sv[1], "cut", 3) == 3);
    close(sv[1]);
    KG_CHECK(kg_lines_read(&r, sv[0], 100, 1000, &line, &len) == KG_LINES_EOF);
    kg_lines_free(&r);
    close(sv[0]);
}

/* Entries of folder `dir` whose names start with `prefix`. */
static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* kg_temp_dir_owned / kg_temp_sweep: a folder whose maker died (its lock with it) is removed by the next sweep; one
 * whose maker holds its lock, and one never marked (kg_temp_dir), are left alone. */
static void temp_dirs_of_a_dead_maker_are_swept(void)
{
    kg_error err;
    char *base = NULL;
    KG_CHECK(kg_temp_dir("kgym-test-sweep", &base, &err) == KG_OK);
    if (!base)
        return;
    const char *old = getenv("TMPDIR");
    char *saved = old ? strdup(old) : NULL;
    setenv("TMPDIR", base, 1);
    pid_t child = fork();
    if (child == 0) {
        char *p = NULL;
        int fd = -1;
        _exit(kg_temp_dir_owned("kgym-eval", &p, &fd, NULL) == KG_OK ? 0 : 1); /* dies holding it */
    }
    int status = -1;
    KG_CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char *mine = NULL, *plain = NULL;
    int lock = -1;
    KG_CHECK(kg_temp_dir_owned("kgym-eval", &mine, &lock, &err) == KG_OK && lock >= 0);
    KG_CHECK(kg_temp_dir("kgym-eval", &plain, &err) == KG_OK);
    KG_CHECK(count_entries(base, "kgym-eval-") == 3);
    KG_CHECK(kg_temp_sweep("kgym-eval") == 1);
    KG_CHECK(count_entries(base, "kgym-eval-") == 2 && kg_dir_exists(mine) && kg_dir_exists(plain));
    KG_CHECK(kg_temp_sweep("kgym-eval") == 0);
    close(lock); /* as if its maker had died: the next sweep takes it */
    KG_CHECK(kg_temp_sweep("kgym-eval") == 1 && !kg_dir_exists(mine) && kg_dir_exists(plain));
    if (saved) {
        setenv("TMPDIR", saved, 1);
        free(saved);
    } else
        unsetenv("TMPDIR");
    kg_remove_tree(base);
    free(base);
    free(mine);
    free(plain);
}

static const kg_test_case cases[] = {
    {"temp_dirs_of_a_dead_maker_are_swept", temp_dirs_of_a_dead_maker_are_swept},
    {"atomic_write_creates_and_replaces", atomic_write_creates_and_replaces},
    {"atomic_write_failure_leaves_old_file_and_no_temp", atomic_write_failure_leaves_old_file_and_no_temp},
    {"atomic_stream_commit_and_abort", atomic_stream_commit_and_abort},
    {"backoff_doubles_caps_and_obeys_retry_after", backoff_doubles_caps_and_obeys_retry_after},
    {"sha256_hex_and_prefixed", sha256_hex_and_prefixed},
    {"json_building_is_checked", json_building_is_checked},
    {"lines_split_keep_and_refuse", lines_split_keep_and_refuse},
};

KG_TEST_MAIN("util", cases)
