/* test_refcache.c — the reference-time cache (src/eval/refcache.c): SHA-256
 * vectors, keys, round trips, corrupt entries, bad keys and concurrent writers. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kg_test.h"
#include "eval/refcache.h"
#include "util/util.h"

static const char *PROTO = "warmup=10;rounds=3;iters=50;flush=1;sets=3;mode=eager";
static const char *TASK = "import torch\nclass Model(torch.nn.Module):\n    pass\n";

/* A fresh cache in a private temp folder; *tmp is the folder to remove. */
static kg_refcache *fresh_cache(char **tmp)
{
    kg_error err;
    kg_refcache *c = NULL;
    *tmp = NULL;
    if (kg_temp_dir("kgym-test-refcache", tmp, &err) != KG_OK) {
        fprintf(stderr, "  %s\n", err.message);
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/cache", *tmp);
    if (kg_refcache_open(path, &c, &err) != KG_OK)
        fprintf(stderr, "  %s\n", err.message);
    return c;
}

static void done(kg_refcache *c, char *tmp)
{
    kg_refcache_close(c);
    if (tmp)
        kg_remove_tree(tmp);
    free(tmp);
}

static json_t *samples_of(const double *x, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_real(x[i]));
    return a;
}

static void entry_file(const kg_refcache *c, const char *key, char *out, size_t size)
{
    snprintf(out, size, "%s/%s.json", kg_refcache_dir(c), key);
}

/* Number of names in dir starting with prefix ("" counts every entry). */
static int count_names(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            strncmp(de->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

static void sha256_vectors(void)
{
    char h[65];
    kg_sha256_hex("", 0, h);
    KG_CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    kg_sha256_hex("abc", 3, h);
    KG_CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    kg_sha256_hex(two_blocks, strlen(two_blocks), h);
    KG_CHECK_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *a = malloc(1000000);
    KG_CHECK(a != NULL);
    if (!a)
        return;
    memset(a, 'a', 1000000);
    kg_sha256_hex(a, 1000000, h);
    KG_CHECK_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* Padding edges: 55 bytes fit one block with the length, 56 and 63 need a
     * second, 64 is exactly one block of data, 119/120 the same one block on. */
    static const struct { size_t n; const char *hex; } edges[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        kg_sha256_hex(a, edges[i].n, h);
        KG_CHECK_STR(h, edges[i].hex);
    }
    free(a);
}

static int is_key(const char *k)
{
    if (strlen(k) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'a' && k[i] <= 'f')))
            return 0;
    return 1;
}

static void key_stable_and_sensitive(void)
{
    kg_error err;
    size_t tl = strlen(TASK);
    char k0[65], k1[65];
    KG_CHECK(kg_refcache_key(TASK, tl, "NVIDIA H100 80GB HBM3", "float32", PROTO, k0, &err) == KG_OK);
    KG_CHECK(is_key(k0));
    KG_CHECK(kg_refcache_key(TASK, tl, "NVIDIA H100 80GB HBM3", "float32", PROTO, k1, &err) == KG_OK);
    KG_CHECK_STR(k0, k1);
    /* The key is not simply the hash of the task. */
    char plain[65];
    kg_sha256_hex(TASK, tl, plain);
    KG_CHECK(strcmp(k0, plain) != 0);

    char other[65];
    char *task2 = kg_strdup(TASK);
    task2[tl - 2] = 'x'; /* one byte of the task */
    KG_CHECK(kg_refcache_key(task2, tl, "NVIDIA H100 80GB HBM3", "float32", PROTO, other, &err) == KG_OK);
    KG_CHECK(strcmp(k0, other) != 0);
    free(task2);
    KG_CHECK(kg_refcache_key(TASK, tl - 1, "NVIDIA H100 80GB HBM3", "float32", PROTO, other, &err) == KG_OK);
    KG_CHECK(strcmp(k0, other) != 0);
    KG_CHECK(kg_refcache_key(TASK, tl, "NVIDIA H200", "float32", PROTO, other, &err) == KG_OK);
    KG_CHECK(strcmp(k0, other) != 0);
    KG_CHECK(kg_refcache_key(TASK, tl, "NVIDIA H100 80GB HBM3", "bfloat16", PROTO, other, &err) == KG_OK);
    KG_CHECK(strcmp(k0, other) != 0);
    KG_CHECK(kg_refcache_key(TASK, tl, "NVIDIA H100 80GB HBM3", "float32",
                             "warmup=10;rounds=3;iters=51;flush=1;sets=3;mode=eager", other, &err) == KG_OK);
    KG_CHECK(strcmp(k0, other) != 0);

    /* Task bytes are taken by length: an embedded NUL counts. */
    char ka[65], kb[65];
    KG_CHECK(kg_refcache_key("ab\0cd", 5, "g", "d", "p", ka, &err) == KG_OK);
    KG_CHECK(kg_refcache_key("ab\0ce", 5, "g", "d", "p", kb, &err) == KG_OK);
    KG_CHECK(strcmp(ka, kb) != 0);
    /* NULL task with length 0 is the empty task. */
    KG_CHECK(kg_refcache_key(NULL, 0, "g", "d", "p", ka, &err) == KG_OK);
    KG_CHECK(kg_refcache_key("", 0, "g", "d", "p", kb, &err) == KG_OK);
    KG_CHECK_STR(ka, kb);
}

static void key_field_boundaries(void)
{
    kg_error err;
    char x[65], y[65];
    /* gpu | dtype */
    KG_CHECK(kg_refcache_key("t", 1, "ab", "c", "p", x, &err) == KG_OK);
    KG_CHECK(kg_refcache_key("t", 1, "a", "bc", "p", y, &err) == KG_OK);
    KG_CHECK(strcmp(x, y) != 0);
    /* dtype | protocol */
    KG_CHECK(kg_refcache_key("t", 1, "g", "ab", "c", x, &err) == KG_OK);
    KG_CHECK(kg_refcache_key("t", 1, "g", "a", "bc", y, &err) == KG_OK);
    KG_CHECK(strcmp(x, y) != 0);
    /* task | gpu */
    KG_CHECK(kg_refcache_key("ab", 2, "c", "d", "p", x, &err) == KG_OK);
    KG_CHECK(kg_refcache_key("a", 1, "bc", "d", "p", y, &err) == KG_OK);
    KG_CHECK(strcmp(x, y) != 0);
    /* an empty field moving along */
    KG_CHECK(kg_refcache_key("t", 1, "", "x", "p", x, &err) == KG_OK);
    KG_CHECK(kg_refcache_key("t", 1, "x", "", "p", y, &err) == KG_OK);
    KG_CHECK(strcmp(x, y) != 0);
}

/* Keys name files on disk: the same inputs must give the same key after any
 * change of the hash's code (these were computed by the hand-written SHA-256
 * this file used before util/hash.c's libcrypto one; a different value means
 * a cache-version bump, REFCACHE_KEY_TAG, and a note in docs). */
static void key_pinned_on_disk(void)
{
    kg_error err;
    char k[65];
    const char *task = "class Model:\n    pass\n";
    KG_CHECK(kg_refcache_key(task, strlen(task), "NVIDIA H100 80GB HBM3", "float32", "cuda-events,l2-flush,v3", k,
                             &err) == KG_OK);
    KG_CHECK_STR(k, "e8179a87b71c45cbc893e8903a8f491538381d0aa5e5b019b533ee79c62c5f1c");
    KG_CHECK(kg_refcache_key("", 0, "", "", "", k, &err) == KG_OK);
    KG_CHECK_STR(k, "87d0e72a26d0208000ff8cdc2cbda1c2d2bc5eecfcc695057965497b3c7bb05b");
    /* The general helper with the same fields is the same key. */
    const kg_hash_field f[] = {KG_HASH_STR("kgym-refcache-key-v1"), KG_HASH_STR(task),
                               KG_HASH_STR("NVIDIA H100 80GB HBM3"), KG_HASH_STR("float32"),
                               KG_HASH_STR("cuda-events,l2-flush,v3")};
    KG_CHECK(kg_sha256_fields(f, 5, k, &err) == KG_OK);
    KG_CHECK_STR(k, "e8179a87b71c45cbc893e8903a8f491538381d0aa5e5b019b533ee79c62c5f1c");
    const kg_hash_field bad[] = {{NULL, 3}};
    KG_CHECK(kg_sha256_fields(bad, 1, k, &err) == KG_ERR_INVALID && k[0] == '\0');
}

static void key_bad_arguments(void)
{
    kg_error err;
    char k[65] = "unchanged";
    KG_CHECK(kg_refcache_key(NULL, 3, "g", "d", "p", k, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_key("t", 1, NULL, "d", "p", k, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "GPU") != NULL);
    KG_CHECK(kg_refcache_key("t", 1, "g", NULL, "p", k, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_key("t", 1, "g", "d", NULL, k, &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "protocol") != NULL);
    KG_CHECK(k[0] == '\0'); /* never a stale key on failure */
    KG_CHECK(kg_refcache_key("t", 1, "g", "d", "p", NULL, &err) == KG_ERR_INVALID);
}

static void open_makes_private_parents(void)
{
    kg_error err;
    char *tmp = NULL;
    KG_CHECK(kg_temp_dir("kgym-test-refcache", &tmp, &err) == KG_OK);
    if (!tmp)
        return;
    char path[4096], deep[4096];
    snprintf(path, sizeof path, "%s/a/b/cache//", tmp);
    snprintf(deep, sizeof deep, "%s/a/b/cache", tmp);
    kg_refcache *c = NULL;
    KG_CHECK(kg_refcache_open(path, &c, &err) == KG_OK);
    KG_CHECK(c != NULL);
    if (c)
        KG_CHECK_STR(kg_refcache_dir(c), deep); /* trailing slashes dropped */
    struct stat st;
    KG_CHECK(stat(deep, &st) == 0 && S_ISDIR(st.st_mode));
    KG_CHECK((st.st_mode & 0777) == 0700);
    snprintf(path, sizeof path, "%s/a", tmp);
    KG_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700);
    /* Opening an existing folder again works. */
    kg_refcache *c2 = NULL;
    KG_CHECK(kg_refcache_open(deep, &c2, &err) == KG_OK);
    kg_refcache_close(c2);
    done(c, tmp);
}

static void open_on_regular_file_fails(void)
{
    kg_error err;
    char *tmp = NULL;
    KG_CHECK(kg_temp_dir("kgym-test-refcache", &tmp, &err) == KG_OK);
    if (!tmp)
        return;
    char file[4096], below[4096];
    snprintf(file, sizeof file, "%s/plain", tmp);
    KG_CHECK(kg_file_write(file, "x", 1, &err) == KG_OK);
    kg_refcache *c = (kg_refcache *)&err; /* must be reset to NULL */
    KG_CHECK(kg_refcache_open(file, &c, &err) == KG_ERR_INVALID);
    KG_CHECK(c == NULL);
    KG_CHECK(strstr(err.message, "not a folder") != NULL);
    KG_CHECK(strstr(err.message, file) != NULL);
    /* A regular file as a parent. */
    snprintf(below, sizeof below, "%s/plain/cache", tmp);
    KG_CHECK(kg_refcache_open(below, &c, &err) == KG_ERR_INVALID);
    KG_CHECK(c == NULL);
    KG_CHECK(strstr(err.message, "not a folder") != NULL);
    KG_CHECK(kg_refcache_open("", &c, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_open(NULL, &c, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_file_exists(file)); /* untouched */
    done(NULL, tmp);
}

/* A folder another user could write is refused: a planted entry would set every later speedup of its task.  The
 * folder itself group- or world-writable, or inside a folder others may change that is not sticky. */
static void open_refuses_a_folder_others_can_write(void)
{
    kg_error err;
    char *tmp = NULL;
    KG_CHECK(kg_temp_dir("kgym-test-refcache", &tmp, &err) == KG_OK);
    if (!tmp)
        return;
    char open_dir[4096], inside[4096], sticky[4096], below_sticky[4096];
    snprintf(open_dir, sizeof open_dir, "%s/open", tmp);
    KG_CHECK(mkdir(open_dir, 0700) == 0 && chmod(open_dir, 0777) == 0);
    kg_refcache *c = NULL;
    KG_CHECK(kg_refcache_open(open_dir, &c, &err) == KG_ERR_INVALID && c == NULL);
    KG_CHECK(strstr(err.message, "writable by others") != NULL);
    KG_CHECK(chmod(open_dir, 0770) == 0);
    KG_CHECK(kg_refcache_open(open_dir, &c, &err) == KG_ERR_INVALID && strstr(err.message, "its group") != NULL);
    /* Ours inside a world-writable parent without the sticky bit: the parent's other users could swap it. */
    snprintf(inside, sizeof inside, "%s/open/cache", tmp);
    KG_CHECK(chmod(open_dir, 0777) == 0);
    KG_CHECK(kg_refcache_open(inside, &c, &err) == KG_ERR_INVALID && strstr(err.message, "lies in") != NULL);
    /* With the sticky bit (as /tmp has), others cannot rename or remove what is ours: taken. */
    snprintf(sticky, sizeof sticky, "%s/sticky", tmp);
    snprintf(below_sticky, sizeof below_sticky, "%s/sticky/cache", tmp);
    KG_CHECK(mkdir(sticky, 0700) == 0 && chmod(sticky, 01777) == 0);
    KG_CHECK(kg_refcache_open(below_sticky, &c, &err) == KG_OK && c != NULL);
    kg_refcache_close(c);
    chmod(open_dir, 0700);
    done(NULL, tmp);
}

static void put_then_get_round_trips(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char key[65];
    KG_CHECK(kg_refcache_key(TASK, strlen(TASK), "NVIDIA H100", "float32", PROTO, key, &err) == KG_OK);
    /* 0.1 and 1/3 check the numbers survive text exactly; 3 is an integer. */
    json_t *ref = json_array();
    json_array_append_new(ref, json_real(1.5));
    json_array_append_new(ref, json_real(0.1));
    json_array_append_new(ref, json_real(1.0 / 3.0));
    json_array_append_new(ref, json_integer(3));
    json_array_append_new(ref, json_real(0));
    time_t before = time(NULL);
    KG_CHECK(kg_refcache_put(c, key, ref, NULL, "NVIDIA H100", "float32", PROTO, &err) == KG_OK);
    KG_CHECK(json_array_size(ref) == 5); /* not stolen, not changed */

    char path[4096];
    entry_file(c, key, path, sizeof path);
    KG_CHECK(kg_file_exists(path));
    KG_CHECK(count_names(kg_refcache_dir(c), "") == 1); /* no temp file left */

    json_t *e = NULL;
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_OK);
    KG_CHECK(e != NULL);
    if (e) {
        json_t *got = json_object_get(e, "reference_ms");
        KG_CHECK(json_array_size(got) == 5);
        const double want[] = {1.5, 0.1, 1.0 / 3.0, 3, 0};
        for (size_t i = 0; i < 5; i++)
            KG_CHECK(json_number_value(json_array_get(got, i)) == want[i]);
        KG_CHECK_STR(json_string_value(json_object_get(e, "gpu")), "NVIDIA H100");
        KG_CHECK_STR(json_string_value(json_object_get(e, "dtype")), "float32");
        KG_CHECK_STR(json_string_value(json_object_get(e, "protocol")), PROTO);
        KG_CHECK_STR(json_string_value(json_object_get(e, "key")), key);
        KG_CHECK(json_integer_value(json_object_get(e, "samples")) == 5);
        json_int_t created = json_integer_value(json_object_get(e, "created"));
        KG_CHECK(created >= before && created <= time(NULL));
        json_decref(e);
    }

    /* A second put replaces the entry. */
    const double again[] = {7.25};
    json_t *ref2 = samples_of(again, 1);
    KG_CHECK(kg_refcache_put(c, key, ref2, NULL, "NVIDIA H100", "float32", PROTO, &err) == KG_OK);
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_OK);
    if (e) {
        KG_CHECK(json_array_size(json_object_get(e, "reference_ms")) == 1);
        KG_CHECK(json_number_value(json_array_get(json_object_get(e, "reference_ms"), 0)) == 7.25);
        json_decref(e);
    }
    KG_CHECK(count_names(kg_refcache_dir(c), "") == 1);
    json_decref(ref);
    json_decref(ref2);
    done(c, tmp);
}

static void get_missing_is_not_found(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char key[65];
    KG_CHECK(kg_refcache_key("t", 1, "g", "d", "p", key, &err) == KG_OK);
    json_t *e = (json_t *)&err; /* must be reset to NULL */
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_ERR_NOT_FOUND);
    KG_CHECK(e == NULL);
    done(c, tmp);
}

/* Writes text under key's file name, then expects get to miss and remove it. */
static void expect_discarded(kg_refcache *c, const char *key, const char *text, const char *what)
{
    char path[4096];
    entry_file(c, key, path, sizeof path);
    kg_error err;
    KG_CHECK(kg_file_write(path, text, strlen(text), &err) == KG_OK);
    json_t *e = NULL;
    int rc = kg_refcache_get(c, key, &e, &err);
    if (rc != KG_ERR_NOT_FOUND || e != NULL || kg_file_exists(path))
        fprintf(stderr, "  corrupt entry (%s) not discarded: rc %d, file %s\n", what, rc,
                kg_file_exists(path) ? "kept" : "gone");
    KG_CHECK(rc == KG_ERR_NOT_FOUND);
    KG_CHECK(e == NULL);
    KG_CHECK(!kg_file_exists(path));
    if (rc == KG_ERR_NOT_FOUND)
        KG_CHECK(strstr(err.message, "removed") != NULL);
    json_decref(e);
    /* Gone means a plain miss now. */
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_ERR_NOT_FOUND);
}

static void corrupt_entries_read_as_missing(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char key[65], other[65];
    KG_CHECK(kg_refcache_key("t", 1, "g", "d", "p", key, &err) == KG_OK);
    KG_CHECK(kg_refcache_key("u", 1, "g", "d", "p", other, &err) == KG_OK);

    /* A genuine entry's text, to truncate and to tamper with. */
    const double x[] = {1, 2, 3};
    json_t *ref = samples_of(x, 3);
    KG_CHECK(kg_refcache_put(c, key, ref, NULL, "g", "d", "p", &err) == KG_OK);
    json_decref(ref);
    char path[4096];
    entry_file(c, key, path, sizeof path);
    char *good = NULL;
    size_t len = 0;
    KG_CHECK(kg_file_read(path, 0, &good, &len, &err) == KG_OK);
    if (!good) {
        done(c, tmp);
        return;
    }
    char *half = kg_strdup(good);
    half[len / 2] = '\0';
    char buf[1024];

    expect_discarded(c, key, "\x01\x02garbage\xff not json", "garbage");
    expect_discarded(c, key, "", "empty");
    expect_discarded(c, key, half, "truncated");
    expect_discarded(c, key, "[1, 2, 3]", "an array");
    expect_discarded(c, key, "{}", "an empty object");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[\"1\",\"2\"],\"gpu\":\"g\",\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":1,\"samples\":2}", key);
    expect_discarded(c, key, buf, "string samples");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,-2],\"gpu\":\"g\",\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":1,\"samples\":2}", key);
    expect_discarded(c, key, buf, "negative sample");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[],\"gpu\":\"g\",\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":1,\"samples\":0}", key);
    expect_discarded(c, key, buf, "no samples");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":{\"a\":1},\"gpu\":\"g\",\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":1,\"samples\":1}", key);
    expect_discarded(c, key, buf, "samples not an array");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,2],\"gpu\":7,\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":1,\"samples\":2}", key);
    expect_discarded(c, key, buf, "numeric gpu");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,2],\"gpu\":\"g\",\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":\"today\",\"samples\":2}", key);
    expect_discarded(c, key, buf, "string created");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,2],\"gpu\":\"g\",\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":1,\"samples\":3}", key);
    expect_discarded(c, key, buf, "wrong count");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,2],\"gpu\":\"g\",\"dtype\":\"d\","
             "\"protocol\":\"p\",\"created\":1,\"samples\":2}", other);
    expect_discarded(c, key, buf, "another key's entry");
    /* The same text under its own name is a valid entry: the checks above
     * failed for the reason named, not for something else. */
    char opath[4096];
    entry_file(c, other, opath, sizeof opath);
    KG_CHECK(kg_file_write(opath, buf, strlen(buf), &err) == KG_OK);
    json_t *e = NULL;
    KG_CHECK(kg_refcache_get(c, other, &e, &err) == KG_OK);
    json_decref(e);
    /* And the genuine text, restored, reads again. */
    KG_CHECK(kg_file_write(path, good, len, &err) == KG_OK);
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_OK);
    json_decref(e);

    /* A symbolic link under an entry's name is removed; its target is not. */
    char target[4096];
    snprintf(target, sizeof target, "%s/target.json", tmp);
    KG_CHECK(kg_file_write(target, good, len, &err) == KG_OK);
    unlink(path);
    KG_CHECK(symlink(target, path) == 0);
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_ERR_NOT_FOUND);
    KG_CHECK(e == NULL);
    struct stat st;
    KG_CHECK(lstat(path, &st) != 0);
    KG_CHECK(kg_file_exists(target));

    /* A folder under an entry's name: a miss, and put reports it. */
    KG_CHECK(mkdir(path, 0700) == 0);
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_ERR_NOT_FOUND);
    const double y[] = {1};
    ref = samples_of(y, 1);
    KG_CHECK(kg_refcache_put(c, key, ref, NULL, "g", "d", "p", &err) == KG_ERR_IO);
    json_decref(ref);
    KG_CHECK(count_names(kg_refcache_dir(c), ".tmp-") == 0);
    rmdir(path);

    free(half);
    free(good);
    done(c, tmp);
}

static void invalid_keys_rejected(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char good[65];
    KG_CHECK(kg_refcache_key("t", 1, "g", "d", "p", good, &err) == KG_OK);
    char upper[65], short_key[64], long_key[66], traversal[65], nonhex[65];
    memcpy(upper, good, 65);
    for (int i = 0; i < 64; i++)
        if (upper[i] >= 'a' && upper[i] <= 'f') {
            upper[i] = (char)(upper[i] - 'a' + 'A');
            break;
        }
    KG_CHECK(strcmp(upper, good) != 0);
    memcpy(short_key, good, 63);
    short_key[63] = '\0';
    memcpy(long_key, good, 64);
    long_key[64] = 'a';
    long_key[65] = '\0';
    memcpy(traversal, "../", 3);
    memcpy(traversal + 3, good, 61); /* 64 characters, but not hex */
    traversal[64] = '\0';
    memcpy(nonhex, good, 65);
    nonhex[10] = 'g';
    const char *bad[] = {"../x", "", upper, short_key, long_key, traversal, nonhex, "/etc/passwd"};
    const double x[] = {1};
    json_t *ref = samples_of(x, 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *e = NULL;
        KG_CHECK(kg_refcache_get(c, bad[i], &e, &err) == KG_ERR_INVALID);
        KG_CHECK(e == NULL);
        KG_CHECK(strstr(err.message, "key") != NULL);
        KG_CHECK(kg_refcache_put(c, bad[i], ref, NULL, "g", "d", "p", &err) == KG_ERR_INVALID);
    }
    json_t *e = NULL;
    KG_CHECK(kg_refcache_get(c, NULL, &e, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_put(c, NULL, ref, NULL, "g", "d", "p", &err) == KG_ERR_INVALID);
    /* Nothing was written, inside the cache or next to it. */
    KG_CHECK(count_names(kg_refcache_dir(c), "") == 0);
    KG_CHECK(count_names(tmp, "") == 1); /* just "cache" */
    json_decref(ref);
    done(c, tmp);
}

static void put_rejects_bad_samples(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char key[65];
    KG_CHECK(kg_refcache_key("t", 1, "g", "d", "p", key, &err) == KG_OK);
    json_t *empty = json_array();
    json_t *negative = json_pack("[f, f, f]", 1.0, -0.5, 2.0);
    json_t *strings = json_pack("[f, s]", 1.0, "2.0");
    json_t *nulls = json_pack("[f, n]", 1.0);
    json_t *bools = json_pack("[b]", 1);
    json_t *nested = json_pack("[[f]]", 1.0);
    json_t *object = json_pack("{s:f}", "a", 1.0);
    json_t *number = json_real(1.0);
    json_t *cases[] = {empty, negative, strings, nulls, bools, nested, object, number, NULL};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = kg_refcache_put(c, key, cases[i], NULL, "g", "d", "p", &err);
        if (rc != KG_ERR_INVALID)
            fprintf(stderr, "  case %zu: rc %d\n", i, rc);
        KG_CHECK(rc == KG_ERR_INVALID);
        json_decref(cases[i]);
    }
    /* the message names the problem */
    json_t *neg = json_pack("[f, f]", 1.0, -3.0);
    KG_CHECK(kg_refcache_put(c, key, neg, NULL, "g", "d", "p", &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "reference_ms[1]") != NULL);
    /* missing or non-UTF-8 metadata */
    json_t *ok = json_pack("[f]", 1.0);
    KG_CHECK(kg_refcache_put(c, key, ok, NULL, NULL, "d", "p", &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_put(c, key, ok, NULL, "g", NULL, "p", &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_put(c, key, ok, NULL, "g", "d", NULL, &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_put(c, key, ok, NULL, "g\xff", "d", "p", &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_put(NULL, key, ok, NULL, "g", "d", "p", &err) == KG_ERR_INVALID);
    KG_CHECK(count_names(kg_refcache_dir(c), "") == 0);
    /* ...and the same call with good arguments works. */
    KG_CHECK(kg_refcache_put(c, key, ok, NULL, "g", "d", "p", &err) == KG_OK);
    KG_CHECK(count_names(kg_refcache_dir(c), "") == 1);
    json_decref(neg);
    json_decref(ok);
    done(c, tmp);
}

/* The same calls on the device-wide clock go with the samples (a candidate timed on that clock is compared with
 * them, and their gap is the reference's own): they round-trip, must be as many and as valid as the samples, and
 * an entry without them (written before they were kept) still reads; one with a tampered device array does not. */
static void device_times_round_trip_and_must_match(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char key[65];
    KG_CHECK(kg_refcache_key("t", 1, "g", "d", "p", key, &err) == KG_OK);
    const double x[] = {1.0, 2.0, 3.0}, xd[] = {1.03, 2.04, 3.05}, bad[] = {1.0, -1.0, 2.0};
    json_t *stream = samples_of(x, 3), *device = samples_of(xd, 3), *short_dev = samples_of(xd, 2);
    json_t *neg = samples_of(bad, 3);
    KG_CHECK(kg_refcache_put(c, key, stream, short_dev, "g", "d", "p", &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "2 device-wide times for 3 samples") != NULL);
    KG_CHECK(kg_refcache_put(c, key, stream, neg, "g", "d", "p", &err) == KG_ERR_INVALID);
    KG_CHECK(kg_refcache_put(c, key, device, stream, "g", "d", "p", &err) == KG_ERR_INVALID); /* below stream */
    KG_CHECK(strstr(err.message, "below its stream time") != NULL);
    /* ... nor far above it (red team 34: stream 1.0, device 1000 was accepted, and a candidate that moved itself to
     * the device-wide clock was divided into it) */
    const double far[] = {1.03, 1000.0, 3.05}, slow[] = {1.03, 2.9, 3.05};
    json_t *far_dev = samples_of(far, 3), *slow_dev = samples_of(slow, 3);
    KG_CHECK(kg_refcache_put(c, key, stream, far_dev, "g", "d", "p", &err) == KG_ERR_INVALID);
    KG_CHECK(strstr(err.message, "after its stream time") != NULL);
    KG_CHECK(kg_refcache_put(c, key, stream, slow_dev, "g", "d", "p", &err) == KG_OK); /* 0.9 ms: a stalled host */
    json_decref(far_dev);
    json_decref(slow_dev);
    KG_CHECK(kg_refcache_put(c, key, stream, device, "g", "d", "p", &err) == KG_OK);
    json_t *e = NULL;
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_OK);
    json_t *got = json_object_get(e, "reference_device_ms");
    KG_CHECK(json_array_size(got) == 3);
    for (size_t i = 0; i < 3 && got; i++)
        KG_CHECK(json_number_value(json_array_get(got, i)) == xd[i]);
    json_decref(e);
    /* Without: no field, and the entry reads as before. */
    KG_CHECK(kg_refcache_put(c, key, stream, NULL, "g", "d", "p", &err) == KG_OK);
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_OK);
    KG_CHECK(e && json_object_get(e, "reference_device_ms") == NULL);
    json_decref(e);
    /* On disk, a device array of another length or with a negative time makes the entry unusable. */
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,2],\"reference_device_ms\":[1.1],\"gpu\":\"g\","
             "\"dtype\":\"d\",\"protocol\":\"p\",\"created\":1,\"samples\":2}", key);
    expect_discarded(c, key, buf, "device times of another length");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,2],\"reference_device_ms\":[1.1,-2],\"gpu\":\"g\","
             "\"dtype\":\"d\",\"protocol\":\"p\",\"created\":1,\"samples\":2}", key);
    expect_discarded(c, key, buf, "a negative device time");
    snprintf(buf, sizeof buf,
             "{\"key\":\"%s\",\"reference_ms\":[1,2],\"reference_device_ms\":[1.1,1.9],\"gpu\":\"g\","
             "\"dtype\":\"d\",\"protocol\":\"p\",\"created\":1,\"samples\":2}", key);
    expect_discarded(c, key, buf, "a device time below its stream time");
    json_decref(stream);
    json_decref(device);
    json_decref(short_dev);
    json_decref(neg);
    done(c, tmp);
}

/* ---- concurrency ---------------------------------------------------------- */

typedef struct {
    kg_refcache *c;
    const char *key;
    int id;
    int failures;
} writer_arg;

/* Entry written by writer id on round i: i + 1 samples, all id * 1000 + i.
 * A reader can check that an entry is one whole write, not a mix. */
static int entry_consistent(const json_t *e)
{
    const json_t *a = json_object_get(e, "reference_ms");
    size_t n = json_array_size(a);
    if (n == 0 || (json_int_t)n != json_integer_value(json_object_get(e, "samples")))
        return 0;
    double v = json_number_value(json_array_get(a, 0));
    int id = (int)(v / 1000), round = (int)v % 1000;
    if ((size_t)round + 1 != n || id < 0 || id > 99)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (json_number_value(json_array_get(a, i)) != v)
            return 0;
    char gpu[32];
    snprintf(gpu, sizeof gpu, "gpu-%d", id);
    return strcmp(json_string_value(json_object_get(e, "gpu")), gpu) == 0;
}

static void *writer(void *p)
{
    writer_arg *w = p;
    char gpu[32];
    snprintf(gpu, sizeof gpu, "gpu-%d", w->id);
    for (int i = 0; i < 50; i++) {
        json_t *a = json_array();
        for (int j = 0; j <= i; j++)
            json_array_append_new(a, json_real(w->id * 1000 + i));
        kg_error err;
        if (kg_refcache_put(w->c, w->key, a, NULL, gpu, "float32", PROTO, &err) != KG_OK) {
            fprintf(stderr, "  writer %d: %s\n", w->id, err.message);
            w->failures++;
        }
        json_decref(a);
        /* Our own put finished, so an entry must exist and be whole. */
        json_t *e = NULL;
        if (kg_refcache_get(w->c, w->key, &e, &err) != KG_OK) {
            fprintf(stderr, "  writer %d get: %s\n", w->id, err.message);
            w->failures++;
        } else if (!entry_consistent(e)) {
            w->failures++;
        }
        json_decref(e);
    }
    return NULL;
}

static void concurrent_threads_same_key(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char key[65];
    KG_CHECK(kg_refcache_key(TASK, strlen(TASK), "race", "float32", PROTO, key, &err) == KG_OK);
    writer_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (writer_arg){c, key, i + 1, 0};
        KG_CHECK(pthread_create(&th[i], NULL, writer, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        KG_CHECK(args[i].failures == 0);
    }
    json_t *e = NULL;
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_OK);
    KG_CHECK(e && entry_consistent(e));
    json_decref(e);
    KG_CHECK(count_names(kg_refcache_dir(c), "") == 1); /* one entry, no temp files */
    done(c, tmp);
}

static void concurrent_processes_same_key(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char key[65];
    KG_CHECK(kg_refcache_key(TASK, strlen(TASK), "race-proc", "float32", PROTO, key, &err) == KG_OK);
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            /* Each process opens its own handle, as separate kgym runs would. */
            kg_refcache *mine = NULL;
            if (kg_refcache_open(kg_refcache_dir(c), &mine, &err) != KG_OK)
                _exit(2);
            writer_arg w = {mine, key, 10 + i, 0};
            writer(&w);
            kg_refcache_close(mine);
            _exit(w.failures ? 1 : 0);
        }
        KG_CHECK(pids[i] > 0);
    }
    for (int i = 0; i < 3; i++) {
        int status = -1;
        if (pids[i] > 0)
            waitpid(pids[i], &status, 0);
        KG_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    json_t *e = NULL;
    KG_CHECK(kg_refcache_get(c, key, &e, &err) == KG_OK);
    KG_CHECK(e && entry_consistent(e));
    json_decref(e);
    KG_CHECK(count_names(kg_refcache_dir(c), "") == 1);
    done(c, tmp);
}

static void open_removes_stale_temp_files(void)
{
    char *tmp;
    kg_refcache *c = fresh_cache(&tmp);
    KG_CHECK(c != NULL);
    if (!c) {
        done(c, tmp);
        return;
    }
    kg_error err;
    char old[4096], fresh[4096], other[4096];
    snprintf(old, sizeof old, "%s/.tmp-dead-AAAAAA", kg_refcache_dir(c));
    snprintf(fresh, sizeof fresh, "%s/.tmp-live-BBBBBB", kg_refcache_dir(c));
    snprintf(other, sizeof other, "%s/notes.txt", kg_refcache_dir(c));
    KG_CHECK(kg_file_write(old, "{", 1, &err) == KG_OK);
    KG_CHECK(kg_file_write(fresh, "{", 1, &err) == KG_OK);
    KG_CHECK(kg_file_write(other, "x", 1, &err) == KG_OK);
    struct timespec two_hours_ago[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    KG_CHECK(utimensat(AT_FDCWD, old, two_hours_ago, 0) == 0);
    KG_CHECK(utimensat(AT_FDCWD, other, two_hours_ago, 0) == 0);
    kg_refcache *again = NULL;
    KG_CHECK(kg_refcache_open(kg_refcache_dir(c), &again, &err) == KG_OK);
    KG_CHECK(!kg_file_exists(old));
    KG_CHECK(kg_file_exists(fresh)); /* may be a live writer's */
    KG_CHECK(kg_file_exists(other)); /* not ours to remove */
    kg_refcache_close(again);
    done(c, tmp);
}

static const kg_test_case cases[] = {
    {"sha256_vectors", sha256_vectors},
    {"key_stable_and_sensitive", key_stable_and_sensitive},
    {"key_field_boundaries", key_field_boundaries},
    {"key_pinned_on_disk", key_pinned_on_disk},
    {"key_bad_arguments", key_bad_arguments},
    {"open_makes_private_parents", open_makes_private_parents},
    {"open_on_regular_file_fails", open_on_regular_file_fails},
    {"open_refuses_a_folder_others_can_write", open_refuses_a_folder_others_can_write},
    {"put_then_get_round_trips", put_then_get_round_trips},
    {"get_missing_is_not_found", get_missing_is_not_found},
    {"corrupt_entries_read_as_missing", corrupt_entries_read_as_missing},
    {"invalid_keys_rejected", invalid_keys_rejected},
    {"put_rejects_bad_samples", put_rejects_bad_samples},
    {"device_times_round_trip_and_must_match", device_times_round_trip_and_must_match},
    {"concurrent_threads_same_key", concurrent_threads_same_key},
    {"concurrent_processes_same_key", concurrent_processes_same_key},
    {"open_removes_stale_temp_files", open_removes_stale_temp_files},
};

KG_TEST_MAIN("refcache", cases)
