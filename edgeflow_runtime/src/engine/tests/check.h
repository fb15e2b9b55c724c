// Minimal test helpers: CHECK records a failure and goes on; main returns the failure count.
#pragma once
#include <cstdio>
#include <random>

namespace edgeflow_test {
inline int& failures() {
    static int n = 0;
    return n;
}
}  // namespace edgeflow_test

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            ++edgeflow_test::failures();                                                 \
        }                                                                                \
    } while (0)

// CHECK that `stmt` throws an exception whose message contains `text`.
#define CHECK_THROWS(stmt, text)                                                                    \
    do {                                                                                            \
        bool thrown_ = false;                                                                       \
        try {                                                                                       \
            stmt;                                                                                   \
        } catch (const std::exception& e_) {                                                        \
            thrown_ = std::string(e_.what()).find(text) != std::string::npos;                       \
            if (!thrown_) std::fprintf(stderr, "%s:%d: wrong message: %s\n", __FILE__, __LINE__, e_.what()); \
        }                                                                                           \
        if (!thrown_) {                                                                             \
            std::fprintf(stderr, "%s:%d: expected an error mentioning \"%s\"\n", __FILE__, __LINE__, text); \
            ++edgeflow_test::failures();                                                            \
        }                                                                                           \
    } while (0)

#define TEST_MAIN_END()                                                           \
    do {                                                                          \
        if (edgeflow_test::failures()) std::fprintf(stderr, "%d check(s) failed\n", edgeflow_test::failures()); \
        else std::printf("ok\n");                                                 \
        return edgeflow_test::failures() ? 1 : 0;                                 \
    } while (0)
