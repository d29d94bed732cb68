/*
 * kgym/export.h — KG_API, the mark of a public function.
 *
 * Every object is compiled with -fvisibility=hidden, so a function is
 * visible outside build/libkgym.so only when its declaration in
 * include/kgym/ carries KG_API (libuv's UV_EXTERN, SQLite's SQLITE_API).
 * Internal functions keep the kg_ prefix but stay hidden; the kgym binary
 * and the unit tests link the objects statically and see them all.
 * tests/integration/test_exports.sh checks that the exported symbols are
 * exactly the functions declared here and in the other public headers.
 */
#ifndef KGYM_EXPORT_H
#define KGYM_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define KG_API __attribute__((visibility("default")))
#else
#define KG_API
#endif

#endif
