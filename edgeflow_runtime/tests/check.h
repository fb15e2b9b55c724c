// Minimal test helpers: CHECK records a failure and continues; main returns the failure count.
#pragma once

#include <cstdio>

inline int g_failures = 0;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                         \
    }                                                                       \
  } while (0)

// Runs `body`, expects it to throw ExceptionType whose what() contains `needle`.
#define CHECK_THROWS(ExceptionType, needle, body)                                              \
  do {                                                                                         \
    bool thrown_ = false;                                                                      \
    try {                                                                                      \
      body;                                                                                    \
    } catch (const ExceptionType& e_) {                                                        \
      thrown_ = std::string(e_.what()).find(needle) != std::string::npos;                      \
      if (!thrown_) std::fprintf(stderr, "%s:%d: wrong error: %s\n", __FILE__, __LINE__, e_.what()); \
    }                                                                                          \
    if (!thrown_) {                                                                            \
      std::fprintf(stderr, "%s:%d: expected " #ExceptionType " with '%s'\n", __FILE__, __LINE__, needle); \
      ++g_failures;                                                                            \
    }                                                                                          \
  } while (0)
