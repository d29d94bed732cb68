/*
 * hash.c — kgym's content hashes (util.h): FNV-1a for identities nobody
 * attacks, and SHA-256 from OpenSSL's libcrypto, the one SHA-256 in kgym, for
 * keys a client controls.  Keys over several fields are hashed length-prefixed
 * (kg_sha256_fields), never joined with a separator a field could contain.
 */
#include "util/util.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

uint64_t kg_hash64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void kg_hash64_string(const void *data, size_t len, char out[32])
{
    snprintf(out, 32, "fnv1a64:%016llx", (unsigned long long)kg_hash64(data, len));
}

static void to_hex(const unsigned char md[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

int kg_sha256_fields(const kg_hash_field *fields, size_t n, char out[65], kg_error *err)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!fields[i].data && fields[i].len)
            return kg_error_set(err, KG_ERR_INVALID, "sha256: field %zu is NULL but its length is %zu", i,
                                fields[i].len);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return kg_error_set(err, KG_ERR_NOMEM, "sha256: out of memory");
    int ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        /* The length as 8 big-endian bytes, then the bytes: the encoding of
         * the reference cache's keys on disk (eval/refcache.c), kept as is. */
        unsigned char len8[8];
        for (int b = 0; b < 8; b++)
            len8[b] = (unsigned char)((uint64_t)fields[i].len >> (56 - 8 * b));
        ok = EVP_DigestUpdate(ctx, len8, sizeof len8) == 1 &&
             (fields[i].len == 0 || EVP_DigestUpdate(ctx, fields[i].data, fields[i].len) == 1);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return kg_error_set(err, KG_ERR_INTERNAL, "sha256: libcrypto failed");
    to_hex(md, out);
    return KG_OK;
}

int kg_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    out[0] = '\0';
    if (EVP_Digest(len ? data : "", len, md, &n, EVP_sha256(), NULL) != 1 || n != 32)
        return KG_ERR_INTERNAL;
    to_hex(md, out);
    return KG_OK;
}

int kg_sha256_string(const void *data, size_t len, char out[KG_SHA256_STRLEN])
{
    memcpy(out, "sha256:", 7);
    int rc = kg_sha256_hex(data, len, out + 7);
    if (rc != KG_OK)
        out[0] = '\0';
    return rc;
}
